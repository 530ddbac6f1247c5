// Package s3store is the adapter to S3-compatible object storage: client,
// bucket creation and presigning.
package s3store

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Options say where the object store is. An empty Endpoint means AWS S3.
// Empty AccessKey and SecretKey mean the AWS SDK's default credential chain:
// the AWS_* variables, the web identity of a Kubernetes service account
// (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN), the shared files, the ECS
// task role, the EC2 instance profile.
type Options struct {
	Endpoint  string
	Region    string
	Bucket    string
	AccessKey string
	SecretKey string

	// ConnectTimeout bounds opening a connection (TCP and TLS); 0 means
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// RequestTimeout bounds each request but an upload's parts, retries
	// included, and each read of an object's body that makes no progress; 0
	// means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// PartTimeout bounds the upload of one part of a multipart upload,
	// retries included; 0 means DefaultPartTimeout.
	PartTimeout time.Duration
}

// Default deadlines of the calls to the object store.
const (
	DefaultConnectTimeout = 5 * time.Second
	DefaultRequestTimeout = 30 * time.Second
	DefaultPartTimeout    = 2 * time.Minute
)

// Store is a client bound to one bucket. Every call it makes has a deadline
// (Options): a hung object store fails the call, it never waits for it.
type Store struct {
	Client *s3.Client
	Bucket string

	requestTimeout time.Duration
	partTimeout    time.Duration
}

// Open builds a client. It does no network call: the default chain's
// credentials are fetched at the first request (an error then if there are
// none).
func Open(o Options) *Store {
	connect := cmp.Or(o.ConnectTimeout, DefaultConnectTimeout)
	request := cmp.Or(o.RequestTimeout, DefaultRequestTimeout)
	hc := awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = connect }).
		WithTransportOptions(func(t *http.Transport) {
			t.TLSHandshakeTimeout = connect
			// The answer to a request fully sent: a server that took it
			// and hangs fails the attempt (an upload's part is bounded by
			// PartTimeout as a whole).
			t.ResponseHeaderTimeout = request
		})
	cfg := aws.Config{
		Region:      o.Region,
		Credentials: credentials.NewStaticCredentialsProvider(o.AccessKey, o.SecretKey, ""),
		HTTPClient:  hc,
	}
	if o.AccessKey == "" && o.SecretKey == "" {
		cfg.Credentials = defaultChain(o.Region)
	}
	cl := s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
			so.UsePathStyle = true
		}
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &Store{Client: cl, Bucket: o.Bucket, requestTimeout: request, partTimeout: cmp.Or(o.PartTimeout, DefaultPartTimeout)}
}

// request bounds one request (with its retries) by the request timeout.
func (s *Store) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.requestTimeout)
}

// Ping checks that the bucket answers with these credentials.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := s.request(ctx)
	defer cancel()
	_, err := s.Client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.Bucket)})
	if err != nil {
		return fmt.Errorf("s3: head bucket %s: %w", s.Bucket, err)
	}
	return nil
}

// EnsureBucket creates the bucket when it does not exist.
func (s *Store) EnsureBucket(ctx context.Context) error {
	if s.Ping(ctx) == nil {
		return nil
	}
	ctx, cancel := s.request(ctx)
	defer cancel()
	_, err := s.Client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		return fmt.Errorf("s3: create bucket %s: %w", s.Bucket, err)
	}
	return nil
}

// defaultChain is the AWS SDK's default credential chain. Loading it reads
// the variables and shared files only; a failure to load is the error of
// every request.
func defaultChain(region string) aws.CredentialsProvider {
	ac, err := awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithRegion(region))
	if err != nil {
		return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, fmt.Errorf("s3: the AWS default credential chain (no --s3-access-key): %w", err)
		})
	}
	return ac.Credentials
}

// Probe writes an object under key, reads it back and deletes it: that the
// bucket takes writes, reads and deletes with these credentials.
func (s *Store) Probe(ctx context.Context, key string) error {
	body := []byte("endcap probe " + key)
	if _, err := s.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		return fmt.Errorf("s3: write %s/%s: %w", s.Bucket, key, err)
	}
	out, err := s.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key)})
	if err != nil {
		return fmt.Errorf("s3: read %s/%s: %w", s.Bucket, key, err)
	}
	got, err := io.ReadAll(io.LimitReader(out.Body, int64(len(body))+1))
	_ = out.Body.Close()
	if err != nil {
		return fmt.Errorf("s3: read %s/%s: %w", s.Bucket, key, err)
	}
	if !bytes.Equal(got, body) {
		return fmt.Errorf("s3: read %s/%s: %d bytes that are not those written", s.Bucket, key, len(got))
	}
	if _, err := s.Client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key)}); err != nil {
		return fmt.Errorf("s3: delete %s/%s: %w", s.Bucket, key, err)
	}
	return nil
}
