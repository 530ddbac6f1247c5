{{- define "endcap.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "endcap.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "endcap.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "endcap.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* selector labels of one component: (dict "root" $ "component" "api") */}}
{{- define "endcap.selectorLabels" -}}
app.kubernetes.io/name: {{ include "endcap.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "endcap.componentLabels" -}}
{{ include "endcap.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "endcap.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "endcap.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "endcap.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The mount directory of one fileSettings item. */}}
{{- define "endcap.fileDir" -}}
/etc/endcap/files/{{ .setting | trimPrefix "ENDCAP_" | lower | replace "_" "-" }}
{{- end -}}

{{/*
The environment of one component: (dict "root" $ "component" "api" "settings" .Values.api.settings).
The chart's own settings first, then .Values.settings, then the component's
(later ones win), then the fileSettings paths.
*/}}
{{- define "endcap.env" -}}
{{- $root := .root -}}
{{- $s := dict "ENDCAP_HTTP_ADDR" (printf "0.0.0.0:%v" $root.Values.ports.http) "ENDCAP_METRICS_ADDR" (printf "0.0.0.0:%v" $root.Values.ports.metrics) -}}
{{- if eq .component "projector" -}}
{{- $_ := set $s "ENDCAP_PROJECTOR_STATE_DIR" "/var/lib/endcap/state" -}}
{{- end -}}
{{- range $k, $v := $root.Values.settings }}{{ $_ := set $s $k $v }}{{ end -}}
{{- range $k, $v := (.settings | default dict) }}{{ $_ := set $s $k $v }}{{ end -}}
{{- range $f := $root.Values.fileSettings }}{{ $_ := set $s $f.setting (printf "%s/%s" (include "endcap.fileDir" $f) $f.key) }}{{ end -}}
{{- range $k, $v := $s }}
- name: {{ $k }}
  value: {{ include "endcap.string" $v | quote }}
{{- end }}
{{- end -}}

{{- define "endcap.fileVolumes" -}}
{{- range $i, $f := .Values.fileSettings }}
- name: file-{{ $i }}
  {{- if $f.secretName }}
  secret:
    secretName: {{ $f.secretName }}
    defaultMode: 0440
    items:
      - key: {{ $f.key }}
        path: {{ $f.key }}
  {{- else }}
  configMap:
    name: {{ $f.configMapName }}
    defaultMode: 0444
    items:
      - key: {{ $f.key }}
        path: {{ $f.key }}
  {{- end }}
{{- end }}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmp.sizeLimit }}
{{- end -}}

{{- define "endcap.fileMounts" -}}
{{- range $i, $f := .Values.fileSettings }}
- name: file-{{ $i }}
  mountPath: {{ include "endcap.fileDir" $f }}
  readOnly: true
{{- end }}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{- define "endcap.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "endcap.securityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "endcap.probes" -}}
startupProbe:
  httpGet: {path: /livez, port: http}
  periodSeconds: 2
  failureThreshold: 60
livenessProbe:
  httpGet: {path: /livez, port: http}
  periodSeconds: 10
  timeoutSeconds: 2
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /readyz, port: http}
  periodSeconds: 5
  timeoutSeconds: 2
  failureThreshold: 2
{{- end -}}

{{- define "endcap.ports" -}}
- name: http
  containerPort: {{ .Values.ports.http }}
  protocol: TCP
- name: metrics
  containerPort: {{ .Values.ports.metrics }}
  protocol: TCP
{{- end -}}

{{/* The pod's scheduling: (dict "root" $ "component" "api") */}}
{{- define "endcap.scheduling" -}}
{{- $root := .root -}}
{{- with $root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- if $root.Values.topologySpread.enabled }}
topologySpreadConstraints:
  - maxSkew: {{ $root.Values.topologySpread.maxSkew }}
    topologyKey: {{ $root.Values.topologySpread.zoneKey }}
    whenUnsatisfiable: {{ $root.Values.topologySpread.whenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- include "endcap.selectorLabels" . | nindent 8 }}
  - maxSkew: {{ $root.Values.topologySpread.maxSkew }}
    topologyKey: {{ $root.Values.topologySpread.nodeKey }}
    whenUnsatisfiable: {{ $root.Values.topologySpread.whenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- include "endcap.selectorLabels" . | nindent 8 }}
{{- end }}
{{- end -}}

{{/* The pod template's metadata and common spec: (dict "root" $ "component" "api") */}}
{{- define "endcap.podMeta" -}}
labels:
  {{- include "endcap.selectorLabels" . | nindent 2 }}
  {{- with .root.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with .root.Values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "endcap.podCommon" -}}
serviceAccountName: {{ include "endcap.serviceAccountName" . }}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- include "endcap.podSecurityContext" . | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A setting's value as the process reads it: YAML numbers arrive as
floats, and a whole one must not become 1.34217728e+08. */}}
{{- define "endcap.string" -}}
{{- if and (kindIs "float64" .) (eq (float64 (int64 .)) .) -}}
{{- int64 . -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}
