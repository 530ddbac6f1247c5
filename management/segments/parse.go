package segments

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/endcap/endcap/internal/validation"
)

// Limits of an uploaded file's lines.
const (
	// MaxOpaqueUserIDLen is the longest member id, in characters (Unicode
	// code points): the opaqueUserId limit of auctions and events.
	MaxOpaqueUserIDLen = 90
	// MaxLineBytes is the longest line read (a CSV row with further columns
	// included); a longer line is rejected without being held in memory.
	MaxLineBytes = 64 << 10
	// CSVHeader, as the first column of the first non-empty line, makes the
	// file a CSV whose first column is the member id.
	CSVHeader = "opaqueUserId"
)

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// lineProblem is one invalid line.
type lineProblem struct {
	line int
	typ  string
	msg  string
}

func (p *lineProblem) fieldError() validation.FieldError {
	return validation.FieldError{Loc: []any{"body", "file", p.line}, Msg: p.msg, Type: p.typ}
}

// idReader reads member ids from a file, one per line (see docs/reference/segments.md).
type idReader struct {
	br   *bufio.Reader
	line int
	mode int // modeUnknown until the first non-empty line
}

const (
	modeUnknown = iota
	modePlain
	modeCSV
)

func newIDReader(r io.Reader) *idReader {
	return &idReader{br: bufio.NewReaderSize(r, MaxLineBytes)}
}

// next returns the next member id. For an invalid line it returns a problem
// (reading may go on); at the end it returns io.EOF; any other error is the
// underlying reader's.
func (r *idReader) next() (string, *lineProblem, error) {
	for {
		raw, err := r.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			r.line++
			for err == bufio.ErrBufferFull {
				_, err = r.br.ReadSlice('\n')
			}
			if err != nil && err != io.EOF {
				return "", nil, err
			}
			return "", &lineProblem{r.line, validation.TooLong, "Line should have at most " + strconv.Itoa(MaxLineBytes) + " bytes"}, nil
		}
		if err != nil && err != io.EOF {
			return "", nil, err
		}
		if len(raw) == 0 && err == io.EOF {
			return "", nil, io.EOF
		}
		r.line++
		if r.line == 1 {
			raw = bytes.TrimPrefix(raw, utf8BOM)
		}
		b := bytes.TrimSpace(raw)
		if len(b) == 0 {
			continue
		}
		if r.mode == modeUnknown {
			r.mode = modePlain
			if f, ok := firstCSVField(b); ok && strings.EqualFold(string(bytes.TrimSpace(f)), CSVHeader) {
				r.mode = modeCSV
				continue
			}
		}
		if r.mode == modeCSV {
			f, ok := firstCSVField(b)
			if !ok {
				return "", &lineProblem{r.line, validation.Invalid, "Line should be a CSV row: a quoted first field is not closed"}, nil
			}
			b = bytes.TrimSpace(f)
		}
		if p := r.check(b); p != nil {
			return "", p, nil
		}
		return string(b), nil, nil
	}
}

func (r *idReader) check(b []byte) *lineProblem {
	switch {
	case len(b) == 0:
		return &lineProblem{r.line, validation.TooShort, "String should have at least 1 character"}
	case !utf8.Valid(b):
		return &lineProblem{r.line, validation.Invalid, "Input should be a valid UTF-8 string"}
	case utf8.RuneCount(b) > MaxOpaqueUserIDLen:
		return &lineProblem{r.line, validation.TooLong, "String should have at most " + strconv.Itoa(MaxOpaqueUserIDLen) + " characters"}
	}
	return nil
}

// firstCSVField returns the first field of a CSV row (RFC 4180: a field in
// double quotes may hold commas and doubled quotes). ok is false when a quoted
// field is not closed on the line.
func firstCSVField(b []byte) (field []byte, ok bool) {
	t := bytes.TrimLeft(b, " \t")
	if len(t) == 0 || t[0] != '"' {
		if i := bytes.IndexByte(b, ','); i >= 0 {
			return b[:i], true
		}
		return b, true
	}
	t = t[1:]
	var out []byte
	for {
		i := bytes.IndexByte(t, '"')
		if i < 0 {
			return nil, false
		}
		if i+1 < len(t) && t[i+1] == '"' {
			out = append(out, t[:i+1]...)
			t = t[i+2:]
			continue
		}
		if out == nil {
			return t[:i], true
		}
		return append(out, t[:i]...), true
	}
}

// errBadGzip marks a gzip file whose data is corrupt.
var errBadGzip = errors.New("the file is not valid gzip data")

// gzipErrReader marks decompression errors so that they read as the file's
// fault, not a transport failure.
type gzipErrReader struct{ r io.Reader }

func (g gzipErrReader) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if err != nil && isGzipDataError(err) {
		err = errBadGzip
	}
	return n, err
}

func isGzipDataError(err error) bool {
	var ce flate.CorruptInputError
	return errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.As(err, &ce)
}

// capReader fails with ErrFileTooLarge once more than max bytes were read.
type capReader struct {
	r   io.Reader
	n   int64
	max int64
}

func (c *capReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		return n, ErrFileTooLarge
	}
	return n, err
}

// openFile returns the reader of the file's text: the file itself, or its
// decompressed content when it starts with the gzip magic bytes. Both the
// file and the decompressed text are capped at max bytes.
func openFile(file io.Reader, max int64) (io.Reader, error) {
	br := bufio.NewReaderSize(&capReader{r: file, max: max}, 32<<10)
	magic, err := br.Peek(2)
	if err != nil && err != io.EOF {
		return nil, err
	}
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			if isGzipDataError(err) || err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil, errBadGzip
			}
			return nil, err
		}
		return &capReader{r: gzipErrReader{zr}, max: max}, nil
	}
	return br, nil
}
