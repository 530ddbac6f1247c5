package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// MinPartSize is the smallest part S3 accepts in a multipart upload, except
// for the last one.
const MinPartSize = 5 << 20

// DefaultPartSize is the part size of NewUpload when none is given: memory
// held by one upload is about this much.
const DefaultPartSize = 8 << 20

// Upload is a multipart upload to one key, written as a stream. Full parts
// are sent by a background goroutine while the writer fills the next one,
// so a producer is not paused for each part's round trip; at most three
// parts are in memory (one being filled, one queued, one being sent). The
// object appears (or replaces the previous one) only when Complete succeeds,
// all at once; until then readers see the old object or none. Abort (or a
// crash: incomplete uploads are invisible, and a bucket lifecycle rule or
// AbortStale removes their parts) leaves the key as it was.
type Upload struct {
	s        *Store
	ctx      context.Context
	key      string
	id       string
	partSize int
	buf      []byte
	done     bool

	queue   chan []byte   // full parts to send, in order
	free    chan []byte   // sent parts' buffers, for reuse
	sent    chan struct{} // closed when the sender has stopped
	stopped bool          // queue closed

	mu    sync.Mutex // guards the fields below, written by the sender
	parts []types.CompletedPart
	size  int64
	err   error

	// AfterPart, when set, is called after each part is stored (tests); it
	// runs on the sender goroutine.
	AfterPart func(n int)
}

// NewUpload starts a multipart upload of key with the given user metadata
// and content type. partSize 0 means DefaultPartSize. ctx bounds every call
// the upload makes, Abort excepted.
func (s *Store) NewUpload(ctx context.Context, key, contentType string, meta map[string]string, partSize int) (*Upload, error) {
	if partSize <= 0 {
		partSize = DefaultPartSize
	}
	rctx, cancel := s.request(ctx)
	defer cancel()
	out, err := s.Client.CreateMultipartUpload(rctx, &s3.CreateMultipartUploadInput{
		Bucket:      aws.String(s.Bucket),
		Key:         aws.String(key),
		ContentType: aws.String(contentType),
		Metadata:    meta,
	})
	if err != nil {
		return nil, fmt.Errorf("s3: start upload of %s: %w", key, err)
	}
	u := &Upload{s: s, ctx: ctx, key: key, id: aws.ToString(out.UploadId), partSize: partSize, buf: make([]byte, 0, partSize),
		queue: make(chan []byte, 1), free: make(chan []byte, 2), sent: make(chan struct{})}
	go u.send()
	return u, nil
}

// send uploads the queued parts in order until the queue is closed. After
// an error it only drains the queue.
func (u *Upload) send() {
	defer close(u.sent)
	for part := range u.queue {
		if u.failed() == nil {
			u.uploadPart(part)
		}
		select {
		case u.free <- part[:0]:
		default:
		}
	}
}

func (u *Upload) uploadPart(part []byte) {
	u.mu.Lock()
	num := int32(len(u.parts) + 1)
	u.mu.Unlock()
	ctx, cancel := context.WithTimeout(u.ctx, u.s.partTimeout)
	defer cancel()
	out, err := u.s.Client.UploadPart(ctx, &s3.UploadPartInput{
		Bucket:        aws.String(u.s.Bucket),
		Key:           aws.String(u.key),
		UploadId:      aws.String(u.id),
		PartNumber:    aws.Int32(num),
		Body:          bytes.NewReader(part),
		ContentLength: aws.Int64(int64(len(part))),
	})
	u.mu.Lock()
	if err != nil {
		u.err = fmt.Errorf("s3: upload part %d of %s: %w", num, u.key, err)
		u.mu.Unlock()
		return
	}
	u.parts = append(u.parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
	u.size += int64(len(part))
	n := len(u.parts)
	u.mu.Unlock()
	if u.AfterPart != nil {
		u.AfterPart(n)
	}
}

func (u *Upload) failed() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

// Write buffers p and queues every full part. It returns the error of an
// earlier part, if any.
func (u *Upload) Write(p []byte) (int, error) {
	if err := u.failed(); err != nil {
		return 0, err
	}
	if u.done {
		return 0, errors.New("s3: write after the upload ended")
	}
	n := 0
	for len(p) > 0 {
		k := min(len(p), u.partSize-len(u.buf))
		u.buf = append(u.buf, p[:k]...)
		p, n = p[k:], n+k
		if len(u.buf) == u.partSize {
			if err := u.enqueue(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// enqueue hands the full buffer to the sender and takes a free one.
func (u *Upload) enqueue() error {
	select {
	case u.queue <- u.buf:
	case <-u.ctx.Done():
		return context.Cause(u.ctx)
	}
	select {
	case b := <-u.free:
		u.buf = b
	default:
		u.buf = make([]byte, 0, u.partSize)
	}
	return u.failed()
}

// stop closes the queue and waits for the sender.
func (u *Upload) stop() {
	if !u.stopped {
		u.stopped = true
		close(u.queue)
	}
	<-u.sent
}

// Complete sends the last part and publishes the object. It returns the
// object's size. On error the upload is aborted.
func (u *Upload) Complete() (int64, error) {
	if u.done {
		return 0, errors.New("s3: complete after the upload ended")
	}
	u.mu.Lock()
	empty := len(u.parts) == 0
	u.mu.Unlock()
	if u.failed() == nil && (len(u.buf) > 0 || empty) {
		// an empty object is one empty part
		if err := u.enqueue(); err != nil {
			u.Abort()
			return 0, err
		}
	}
	u.stop()
	err := u.failed()
	if err == nil {
		u.mu.Lock()
		parts := u.parts
		u.mu.Unlock()
		ctx, cancel := u.s.request(u.ctx)
		_, err = u.s.Client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket:          aws.String(u.s.Bucket),
			Key:             aws.String(u.key),
			UploadId:        aws.String(u.id),
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		})
		cancel()
		if err != nil {
			err = fmt.Errorf("s3: complete upload of %s: %w", u.key, err)
		}
	}
	if err != nil {
		u.mu.Lock()
		u.err = err
		u.mu.Unlock()
		u.Abort()
		return 0, err
	}
	u.done = true
	return u.size, nil
}

// Abort discards the parts sent so far; the key keeps its previous object
// (or stays absent). It is safe to call more than once and after Complete.
func (u *Upload) Abort() {
	if u.done {
		return
	}
	u.done = true
	u.mu.Lock()
	if u.err == nil {
		u.err = errors.New("s3: upload aborted")
	}
	u.mu.Unlock()
	u.stop()
	// On a context of its own: the caller's may be why the upload failed.
	ctx, cancel := u.s.request(context.WithoutCancel(u.ctx))
	defer cancel()
	_, _ = u.s.Client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket: aws.String(u.s.Bucket), Key: aws.String(u.key), UploadId: aws.String(u.id),
	})
}

// AbortStale aborts the unfinished multipart uploads of exactly key that
// began before the given time (left by a process that died mid-upload).
func (s *Store) AbortStale(ctx context.Context, key string, before time.Time) error {
	lctx, cancel := s.request(ctx)
	defer cancel()
	out, err := s.Client.ListMultipartUploads(lctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(s.Bucket), Prefix: aws.String(key)})
	if err != nil {
		return fmt.Errorf("s3: list uploads of %s: %w", key, err)
	}
	for _, up := range out.Uploads {
		if aws.ToString(up.Key) != key || up.Initiated == nil || !up.Initiated.Before(before) {
			continue
		}
		actx, cancel := s.request(ctx)
		_, err := s.Client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket: aws.String(s.Bucket), Key: up.Key, UploadId: up.UploadId,
		})
		cancel()
		if err != nil {
			return fmt.Errorf("s3: abort stale upload of %s: %w", key, err)
		}
	}
	return nil
}

// ObjectInfo is what a HEAD tells about an object.
type ObjectInfo struct {
	Size         int64
	LastModified time.Time
	Metadata     map[string]string // user metadata, keys in lower case
	ETag         string            // the object's version: a replaced object has another
}

// Head describes key; ok is false when the object does not exist.
func (s *Store) Head(ctx context.Context, key string) (ObjectInfo, bool, error) {
	ctx, cancel := s.request(ctx)
	defer cancel()
	out, err := s.Client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key)})
	if err != nil {
		if isNotFound(err) {
			return ObjectInfo{}, false, nil
		}
		return ObjectInfo{}, false, fmt.Errorf("s3: head %s: %w", key, err)
	}
	return ObjectInfo{Size: aws.ToInt64(out.ContentLength), LastModified: aws.ToTime(out.LastModified), Metadata: out.Metadata, ETag: aws.ToString(out.ETag)}, true, nil
}

func isNotFound(err error) bool {
	var nf *types.NotFound
	var nk *types.NoSuchKey
	if errors.As(err, &nf) || errors.As(err, &nk) {
		return true
	}
	var re interface{ HTTPStatusCode() int }
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound
}

// PresignGet returns a URL that downloads key with a plain GET until
// lifetime has passed (signature version 4, checked by the server), and the
// instant it stops working. It makes no network call.
func (s *Store) PresignGet(ctx context.Context, key string, lifetime time.Duration) (string, time.Time, error) {
	now := time.Now().UTC()
	req, err := s3.NewPresignClient(s.Client).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key)},
		func(o *s3.PresignOptions) { o.Expires = lifetime })
	if err != nil {
		return "", time.Time{}, fmt.Errorf("s3: presign %s: %w", key, err)
	}
	return req.URL, now.Add(lifetime).Truncate(time.Second), nil
}

// Object is an object being read: its body as a stream, and what a HEAD
// tells about it. Close the body.
type Object struct {
	Body        io.ReadCloser
	ContentType string
	ObjectInfo
}

// Get opens key for reading as a stream (ctx bounds the whole read); ok is
// false when the object does not exist. Opening it, and each Read of the
// body, fail after the request timeout without an answer; the time between
// Reads does not count.
func (s *Store) Get(ctx context.Context, key string) (Object, bool, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	stall := time.AfterFunc(s.requestTimeout, func() { cancel(errStalled) })
	out, err := s.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key)})
	stall.Stop()
	if err != nil {
		cancel(nil)
		if cause := context.Cause(ctx); errors.Is(cause, errStalled) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
		if isNotFound(err) {
			return Object{}, false, nil
		}
		return Object{}, false, fmt.Errorf("s3: get %s: %w", key, err)
	}
	body := &stallBody{ReadCloser: out.Body, timer: stall, d: s.requestTimeout, cancel: cancel, ctx: ctx}
	return Object{Body: body, ContentType: aws.ToString(out.ContentType),
		ObjectInfo: ObjectInfo{Size: aws.ToInt64(out.ContentLength), LastModified: aws.ToTime(out.LastModified), Metadata: out.Metadata, ETag: aws.ToString(out.ETag)}}, true, nil
}

// ErrChanged: the object a RangeReader reads was replaced or removed.
var ErrChanged = errors.New("s3: the object was replaced or removed while it was read")

// RangeReader reads one version of an object (its ETag: a request after
// the key was replaced fails) at random offsets (an
// io.ReaderAt, for formats read from their end such as Parquet) with ranged
// GETs of whole blocks, keeping the most recently used blocks: memory is at
// most blocks × blockSize, and a reader that moves forward through a few
// regions at once (a Parquet file's columns) makes one request per block.
type RangeReader struct {
	s         *Store
	ctx       context.Context
	key       string
	etag      string
	size      int64
	blockSize int64
	max       int

	mu    sync.Mutex
	cache map[int64][]byte
	order []int64 // least recently used first
}

// NewRangeReader reads the version of key that info describes (a HEAD's),
// in blocks of blockSize, keeping at most blocks of them. ctx bounds every
// request.
func (s *Store) NewRangeReader(ctx context.Context, key string, info ObjectInfo, blockSize, blocks int) *RangeReader {
	return &RangeReader{s: s, ctx: ctx, key: key, etag: info.ETag, size: info.Size, blockSize: int64(blockSize), max: max(blocks, 1), cache: map[int64][]byte{}}
}

// Size is the object's size.
func (r *RangeReader) Size() int64 { return r.size }

// ReadAt implements io.ReaderAt.
func (r *RangeReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("s3: negative offset")
	}
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		if pos >= r.size {
			return n, io.EOF
		}
		k, err := r.copyFrom(p[n:], pos)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// copyFrom copies into p what the block of pos holds from pos on (under
// the lock: the block's buffer may be reused once it is evicted).
func (r *RangeReader) copyFrom(p []byte, pos int64) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.block(pos / r.blockSize)
	if err != nil {
		return 0, err
	}
	return copy(p, b[pos%r.blockSize:]), nil
}

// block returns block i, read when it is not kept (r.mu held).
func (r *RangeReader) block(i int64) ([]byte, error) {
	if b, ok := r.cache[i]; ok {
		r.touch(i)
		return b, nil
	}
	start := i * r.blockSize
	end := min(start+r.blockSize, r.size) - 1
	in := &s3.GetObjectInput{Bucket: aws.String(r.s.Bucket), Key: aws.String(r.key), Range: aws.String(fmt.Sprintf("bytes=%d-%d", start, end))}
	if r.etag != "" {
		in.IfMatch = aws.String(r.etag)
	}
	ctx, cancel := r.s.request(r.ctx) // the request and the read of its body
	defer cancel()
	out, err := r.s.Client.GetObject(ctx, in)
	if err != nil {
		var re interface{ HTTPStatusCode() int }
		if errors.As(err, &re) && (re.HTTPStatusCode() == http.StatusPreconditionFailed || re.HTTPStatusCode() == http.StatusNotFound) {
			return nil, fmt.Errorf("%w: %s: %w", ErrChanged, r.key, err)
		}
		return nil, fmt.Errorf("s3: get %s bytes %d-%d: %w", r.key, start, end, err)
	}
	defer out.Body.Close()
	var b []byte
	if len(r.order) >= r.max {
		old := r.order[0]
		b = r.cache[old][:0]
		delete(r.cache, old)
		r.order = r.order[1:]
	}
	if cap(b) < int(end-start+1) {
		b = make([]byte, 0, r.blockSize)
	}
	b = b[:end-start+1]
	if _, err := io.ReadFull(out.Body, b); err != nil {
		return nil, fmt.Errorf("s3: read %s bytes %d-%d: %w", r.key, start, end, err)
	}
	r.cache[i] = b
	r.order = append(r.order, i)
	return b, nil
}

// touch makes block i the most recently used.
func (r *RangeReader) touch(i int64) {
	for k, j := range r.order {
		if j == i {
			copy(r.order[k:], r.order[k+1:])
			r.order[len(r.order)-1] = i
			return
		}
	}
}

// errStalled: the object store did not answer within the request timeout.
var errStalled = errors.New("s3: no answer within the request timeout")

// stallBody is an object's body whose every Read fails once it has waited
// the request timeout for the store (ctx is cancelled with errStalled).
type stallBody struct {
	io.ReadCloser
	timer  *time.Timer
	d      time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func (b *stallBody) Read(p []byte) (int, error) {
	b.timer.Reset(b.d)
	n, err := b.ReadCloser.Read(p)
	b.timer.Stop()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, errStalled) {
		if cause := context.Cause(b.ctx); errors.Is(cause, errStalled) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
	}
	return n, err
}

func (b *stallBody) Close() error {
	b.timer.Stop()
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// ErrNoBucket: the bucket does not exist.
var ErrNoBucket = errors.New("no such bucket")

// Listed is one object of a listing.
type Listed struct {
	Key          string
	Size         int64
	ETag         string
	LastModified time.Time
}

// List returns every object whose key begins with prefix, in key order, a
// page (ListPage) at a time: each page's request has the request timeout;
// ctx bounds the whole listing.
func (s *Store) List(ctx context.Context, prefix string) ([]Listed, error) {
	var out []Listed
	token := ""
	for {
		page, next, err := s.ListPage(ctx, prefix, token, 1000)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if next == "" {
			return out, nil
		}
		token = next
	}
}

// ListPage lists up to max objects (1 to 1,000) whose keys start with prefix,
// in key order, after the page that returned token ("" for the first); next
// is "" after the last page. Each page is one request with its deadline.
func (s *Store) ListPage(ctx context.Context, prefix, token string, max int32) (objs []Listed, next string, err error) {
	ctx, cancel := s.request(ctx)
	defer cancel()
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.Bucket), Prefix: aws.String(prefix), MaxKeys: aws.Int32(max)}
	if token != "" {
		in.ContinuationToken = aws.String(token)
	}
	out, err := s.Client.ListObjectsV2(ctx, in)
	if err != nil {
		var nb *types.NoSuchBucket
		if errors.As(err, &nb) {
			return nil, "", fmt.Errorf("s3: list %s/%s: %w", s.Bucket, prefix, ErrNoBucket)
		}
		return nil, "", fmt.Errorf("s3: list %s/%s: %w", s.Bucket, prefix, err)
	}
	for _, o := range out.Contents {
		objs = append(objs, Listed{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag),
			LastModified: aws.ToTime(o.LastModified)})
	}
	if aws.ToBool(out.IsTruncated) {
		next = aws.ToString(out.NextContinuationToken)
	}
	return objs, next, nil
}

// Delete removes the objects keys (at most 1,000), in one request with its
// deadline; a key that does not exist is not an error.
func (s *Store) Delete(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	ctx, cancel := s.request(ctx)
	defer cancel()
	ids := make([]types.ObjectIdentifier, len(keys))
	for i, k := range keys {
		ids[i] = types.ObjectIdentifier{Key: aws.String(k)}
	}
	out, err := s.Client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(s.Bucket),
		Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
	if err != nil {
		return fmt.Errorf("s3: delete %d objects: %w", len(keys), err)
	}
	for _, e := range out.Errors {
		if aws.ToString(e.Code) != "NoSuchKey" {
			return fmt.Errorf("s3: delete %s: %s %s", aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message))
		}
	}
	return nil
}
