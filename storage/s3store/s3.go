// Package s3store is the adapter to S3-compatible object storage: client,
// bucket creation and presigning.
package s3store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Options say where the object store is. An empty Endpoint means AWS S3.
type Options struct {
	Endpoint  string
	Region    string
	Bucket    string
	AccessKey string
	SecretKey string
}

// Store is a client bound to one bucket.
type Store struct {
	Client *s3.Client
	Bucket string
}

// Open builds a client. It does no network call.
func Open(o Options) *Store {
	cfg := aws.Config{
		Region:      o.Region,
		Credentials: credentials.NewStaticCredentialsProvider(o.AccessKey, o.SecretKey, ""),
	}
	cl := s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
			so.UsePathStyle = true
		}
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &Store{Client: cl, Bucket: o.Bucket}
}

// Ping checks that the bucket answers with these credentials.
func (s *Store) Ping(ctx context.Context) error {
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
	_, err := s.Client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		return fmt.Errorf("s3: create bucket %s: %w", s.Bucket, err)
	}
	return nil
}
