package scoredfiles

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/storage/s3store"
)

// Reading a stored file for a download: the whole object as a stream (the
// marketplace's), or a Parquet file of one vendor's rows of it, made while
// it is sent. The vendor's rows are the attributions credited to its
// campaigns: the rows whose vendor_id (the campaign's vendor, a catalog id)
// is the vendor's catalog id. item_vendor_id is the purchased item's vendor
// as the purchase named it (any form): it does not make a row the vendor's.

// Range reads of a stored file: blocks of rangeBlock bytes, at most
// rangeBlocks of them kept (a row group's columns are read side by side).
// Variables for the tests.
var (
	rangeBlock  = 256 << 10
	rangeBlocks = 48
)

// Stored is a day's stored file.
type Stored struct {
	Key        string
	Date       string // the local day, YYYY-MM-DD
	ProducedAt time.Time
	Final      bool
	info       s3store.ObjectInfo
}

// Size is the stored file's size in bytes.
func (st Stored) Size() int64 { return st.info.Size }

// Stored describes the file of mp's local day; ok is false when the day
// has no file yet.
func (s *Service) Stored(ctx context.Context, marketplaceID string, day time.Time) (Stored, bool, error) {
	key := Key(marketplaceID, day)
	hctx, cancel := context.WithTimeout(ctx, headTimeout)
	info, ok, err := s.s3.Head(hctx, key)
	cancel()
	if err != nil {
		return Stored{}, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if !ok {
		return Stored{}, false, nil
	}
	st := Stored{Key: key, Date: day.Format(time.DateOnly), ProducedAt: info.LastModified.UTC(), Final: info.Metadata[metaFinal] == "true", info: info}
	if t, err := timestamp.Parse(info.Metadata[metaProducedAt]); err == nil {
		st.ProducedAt = t
	}
	return st, true, nil
}

// errReplaced: the stored file was replaced while it was read.
var errReplaced = errkind.New(errkind.Conflict, "the file was replaced while it was read; download it again")

// Open opens the whole stored file for reading as a stream (ctx bounds
// the read); close it. A file re-produced since st was read is an error.
func (s *Service) Open(ctx context.Context, st Stored) (io.ReadCloser, error) {
	obj, ok, err := s.s3.Get(ctx, st.Key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if !ok {
		return nil, errReplaced
	}
	if obj.ETag != st.info.ETag {
		obj.Body.Close()
		return nil, errReplaced
	}
	return obj.Body, nil
}

// CopyVendor writes to w a Parquet file of the stored file's rows credited
// to vendor (a catalog id): the same columns, compression and key-value
// metadata, plus endcap.vendor_id. It reads the stored file with ranged
// requests and writes a row group at a time: memory is bounded by the read
// blocks and one row group of the vendor's rows, whatever the file's size.
// It returns the rows written.
func (s *Service) CopyVendor(ctx context.Context, st Stored, vendor string, w io.Writer) (int64, error) {
	if vendor == "" {
		return 0, errors.New("scoredfiles: no vendor")
	}
	return s.copyRows(ctx, st, w, []string{"endcap.vendor_id", vendor}, func(r *Record) bool { return r.VendorID == vendor })
}

// copyRows writes to w a Parquet file of the stored file's rows that keep
// accepts (keep may change a row before it is written): the same columns,
// compression and key-value metadata, plus the key-value pairs of extra. It
// reads the stored file with ranged requests and writes a row group at a
// time: memory is bounded by the read blocks and one row group, whatever
// the file's size. It returns the rows written.
func (s *Service) copyRows(ctx context.Context, st Stored, w io.Writer, extra []string, keep func(*Record) bool) (int64, error) {
	rr := s.s3.NewRangeReader(ctx, st.Key, st.info, rangeBlock, rangeBlocks)
	f, err := parquet.OpenFile(rr, rr.Size(), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true), parquet.ReadBufferSize(64<<10))
	if errors.Is(err, s3store.ErrChanged) {
		return 0, errReplaced
	}
	if err != nil {
		return 0, fmt.Errorf("%w: open %s: %w", ErrUnavailable, st.Key, err)
	}
	rgRows := s.RowGroupRows
	if rgRows <= 0 {
		rgRows = DefaultRowGroupRows
	}
	opts := []parquet.WriterOption{parquet.MaxRowsPerRowGroup(rgRows), parquet.Compression(&zstd.Codec{}),
		parquet.CreatedBy("endcap", "scored-attribution", SchemaVersion)}
	for i := 0; i+1 < len(extra); i += 2 {
		opts = append(opts, parquet.KeyValueMetadata(extra[i], extra[i+1]))
	}
	for _, kv := range f.Metadata().KeyValueMetadata {
		opts = append(opts, parquet.KeyValueMetadata(kv.Key, kv.Value))
	}
	out := parquet.NewGenericWriter[Record](w, opts...)
	var rows int64
	batch := make([]Record, writeBatch)
	kept := make([]Record, 0, writeBatch)
	for _, rg := range f.RowGroups() {
		r := parquet.NewGenericRowGroupReader[Record](rg)
		for {
			n, rerr := r.Read(batch)
			kept = kept[:0]
			for i := range batch[:n] {
				if keep(&batch[i]) {
					kept = append(kept, batch[i])
				}
			}
			if len(kept) > 0 {
				if _, err := out.Write(kept); err != nil {
					_ = r.Close()
					return rows, fmt.Errorf("scoredfiles: write rows: %w", err)
				}
				rows += int64(len(kept))
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				_ = r.Close()
				if errors.Is(rerr, s3store.ErrChanged) {
					return rows, errReplaced
				}
				return rows, fmt.Errorf("scoredfiles: read %s: %w", st.Key, rerr)
			}
			if ctx.Err() != nil {
				_ = r.Close()
				return rows, context.Cause(ctx)
			}
		}
		if err := r.Close(); err != nil {
			return rows, err
		}
	}
	if err := out.Close(); err != nil {
		return rows, fmt.Errorf("scoredfiles: finish file: %w", err)
	}
	return rows, nil
}

// VendorFileName is the name of a vendor's download of a day.
func VendorFileName(day, vendorUUID string) string {
	return "scored-attribution-" + day + "-vendor-" + vendorUUID + ".parquet"
}

// FileName is the name of the marketplace's download of a day.
func FileName(day string) string { return "scored-attribution-" + day + ".parquet" }

// DayOf reads a local day YYYY-MM-DD.
func DayOf(s string) (time.Time, bool) {
	if len(s) != len(time.DateOnly) {
		return time.Time{}, false
	}
	d, err := time.Parse(time.DateOnly, s)
	return d, err == nil
}
