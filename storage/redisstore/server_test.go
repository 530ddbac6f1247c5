package redisstore

import "testing"

func TestParseInfo(t *testing.T) {
	tests := []struct {
		name, text  string
		want        ServerInfo
		parseErr    bool
		unsupported bool
		evicts      bool
	}{
		{name: "Debian's 7.0", text: "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n\n# Memory\r\nused_memory:1000\r\nmaxmemory_policy:noeviction\r\n",
			want: ServerInfo{Version: "7.0.15", Major: 7, Minor: 0, MaxmemoryPolicy: "noeviction"}},
		{name: "7.4, evicting", text: "redis_version:7.4.1\nmaxmemory_policy:allkeys-lru\n",
			want: ServerInfo{Version: "7.4.1", Major: 7, Minor: 4, MaxmemoryPolicy: "allkeys-lru"}, evicts: true},
		{name: "Valkey 8 (reports a Redis version too)", text: "redis_version:7.2.4\nserver_name:valkey\nvalkey_version:8.0.1\nmaxmemory_policy:noeviction\n",
			want: ServerInfo{Version: "7.2.4", Major: 7, Minor: 2, MaxmemoryPolicy: "noeviction"}},
		{name: "6.2: too old", text: "redis_version:6.2.14\nmaxmemory_policy:noeviction\n",
			want: ServerInfo{Version: "6.2.14", Major: 6, Minor: 2, MaxmemoryPolicy: "noeviction"}, unsupported: true},
		{name: "major only", text: "redis_version:8\nmaxmemory_policy:volatile-ttl\n",
			want: ServerInfo{Version: "8", Major: 8, MaxmemoryPolicy: "volatile-ttl"}, evicts: true},
		{name: "no version", text: "maxmemory_policy:noeviction\n", parseErr: true},
		{name: "no policy", text: "redis_version:7.0.0\n", parseErr: true},
		{name: "garbage version", text: "redis_version:seven\nmaxmemory_policy:noeviction\n", parseErr: true},
		{name: "empty", text: "", parseErr: true},
	}
	for _, tc := range tests {
		got, err := ParseInfo(tc.text)
		if (err != nil) != tc.parseErr {
			t.Errorf("%s: error %v, want error %v", tc.name, err, tc.parseErr)
			continue
		}
		if tc.parseErr {
			continue
		}
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		if (got.Supported() != nil) != tc.unsupported {
			t.Errorf("%s: Supported() = %v, want unsupported %v", tc.name, got.Supported(), tc.unsupported)
		}
		if got.Evicts() != tc.evicts {
			t.Errorf("%s: Evicts() = %v, want %v", tc.name, got.Evicts(), tc.evicts)
		}
	}
}
