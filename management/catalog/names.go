package catalog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unicode/utf8"
)

// nameIndex is what the console's product search without a vendor reads:
// every product's id and name, in lower case, one record after another in a
// file of the process's own (beside the texts store, ENDCAP_CATALOG_DIR),
// searched by a pass of bytes.Index over the file in blocks. The file is
// read through the OS page cache, outside the Go heap; in memory the index
// keeps, per product number (statelog.Collection.ByNum), where its record
// is: 8 bytes a product, in chunks (no slack to grow into).
//
// A change appends the product's new record; the old one is dead (its
// number's place points elsewhere), and the file is rewritten with the live
// records only when the dead bytes outgrow the live ones. Records are
// written in blocks of nameBlock bytes; the last, unwritten block is read
// from memory.
type nameIndex struct {
	dir string

	// scanMu is held (read) by searches for their pass over the file, and
	// by compact (write) to replace it.
	scanMu sync.RWMutex

	mu         sync.RWMutex
	f          *os.File
	size       int64  // bytes of records in f
	tail       []byte // records after size, not yet written
	pos        [][]uint64
	live, dead int64
	mps        map[string]uint32
	err        error // the file could not be written: searches fail
	minCompact int64 // dead bytes below which compact does not rewrite
}

const (
	nameBlock    = 64 << 10 // bytes of records written at once
	nameReadSize = 1 << 20  // bytes of the file a search reads at once
	posChunk     = 1 << 16  // product numbers a chunk of pos holds
	nameHeader   = 12       // num u32, marketplace u32, id length u16, text length u16
)

func newNameIndex(dir string) *nameIndex {
	return &nameIndex{dir: dir, mps: map[string]uint32{}, minCompact: 16 << 20}
}

// place packs a record's offset and length (pos's values; 0 is none).
func place(off int64, n int) uint64 { return uint64(off+1)<<24 | uint64(n) }

func (x *nameIndex) at(num uint32) uint64 {
	if c := int(num / posChunk); c < len(x.pos) {
		return x.pos[c][num%posChunk]
	}
	return 0
}

func (x *nameIndex) setAt(num uint32, v uint64) {
	c := int(num / posChunk)
	for len(x.pos) <= c {
		x.pos = append(x.pos, make([]uint64, posChunk))
	}
	x.pos[c][num%posChunk] = v
}

// appendLower appends s in lower case (strings.ToLower's, without
// allocating for ASCII).
func appendLower(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return append(b, strings.ToLower(s)...)
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

// set makes the record of product num (of mp) its id and name.
func (x *nameIndex) set(mp string, num uint32, id, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.drop(num)
	code, ok := x.mps[mp]
	if !ok {
		code = uint32(len(x.mps))
		x.mps[strings.Clone(mp)] = code
	}
	start := len(x.tail)
	var h [nameHeader]byte
	x.tail = append(x.tail, h[:]...)
	x.tail = append(x.tail, id...)
	textAt := len(x.tail)
	x.tail = appendLower(x.tail, id)
	x.tail = append(x.tail, 0) // no id or name holds NUL (docs/reference/errors.md): no match spans the two
	x.tail = appendLower(x.tail, name)
	rec := x.tail[start:]
	binary.LittleEndian.PutUint32(rec[0:], num)
	binary.LittleEndian.PutUint32(rec[4:], code)
	binary.LittleEndian.PutUint16(rec[8:], uint16(len(id)))
	binary.LittleEndian.PutUint16(rec[10:], uint16(len(x.tail)-textAt))
	x.setAt(num, place(x.size+int64(start), len(rec)))
	x.live += int64(len(rec))
	if len(x.tail) >= nameBlock {
		x.flush()
	}
}

// remove forgets product num (deleted).
func (x *nameIndex) remove(num uint32) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.drop(num)
}

// drop counts num's record dead (under mu), and rewrites the file when the
// dead bytes are due.
func (x *nameIndex) drop(num uint32) {
	p := x.at(num)
	if p == 0 {
		return
	}
	n := int64(p & (1<<24 - 1))
	x.setAt(num, 0)
	x.live -= n
	x.dead += n
	if x.dead > max(x.live, x.minCompact) {
		x.compact()
	}
}

// flush writes the tail to the file (under mu).
func (x *nameIndex) flush() {
	if x.err != nil || len(x.tail) == 0 {
		return
	}
	if x.f == nil {
		f, err := os.CreateTemp(x.dir, "names-")
		if err != nil {
			x.err = err
			return
		}
		x.f = f
	}
	if _, err := x.f.WriteAt(x.tail, x.size); err != nil {
		x.err = err
		return
	}
	x.size += int64(len(x.tail))
	x.tail = x.tail[:0]
}

// compact rewrites the file with the live records only (under mu). It waits
// for the searches under way.
func (x *nameIndex) compact() {
	x.scanMu.Lock()
	defer x.scanMu.Unlock()
	x.flush()
	if x.err != nil || x.f == nil {
		return
	}
	old, oldSize := x.f, x.size
	x.f, x.size, x.live, x.dead = nil, 0, 0, 0
	err := eachRecord(old, oldSize, nil, func(off int64, rec []byte) bool {
		num := binary.LittleEndian.Uint32(rec)
		if x.at(num) != place(off, len(rec)) {
			return true
		}
		x.setAt(num, place(x.size+int64(len(x.tail)), len(rec)))
		x.live += int64(len(rec))
		x.tail = append(x.tail, rec...)
		if len(x.tail) >= nameBlock {
			x.flush()
		}
		return x.err == nil
	})
	if err != nil && x.err == nil {
		x.err = err
	}
	x.flush()
	_ = old.Close()
	_ = os.Remove(old.Name())
}

// close removes the file.
func (x *nameIndex) close() {
	x.scanMu.Lock()
	defer x.scanMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f != nil {
		_ = x.f.Close()
		_ = os.Remove(x.f.Name())
		x.f = nil
	}
	x.err = errors.New("closed")
}

// eachRecord calls fn with every record of f's first size bytes, then of
// tail, and its offset, until fn returns false.
func eachRecord(f *os.File, size int64, tail []byte, fn func(off int64, rec []byte) bool) error {
	buf := make([]byte, 0, nameReadSize)
	for off := int64(0); off < size; {
		n := min(int64(nameReadSize), size-off)
		buf = buf[:n]
		if _, err := f.ReadAt(buf, off); err != nil {
			return fmt.Errorf("the names file: %w", err)
		}
		used := 0
		for used+nameHeader <= len(buf) {
			l := recLen(buf[used:])
			if used+l > len(buf) {
				break
			}
			if !fn(off+int64(used), buf[used:used+l]) {
				return nil
			}
			used += l
		}
		if used == 0 {
			return errors.New("the names file: a record larger than a block")
		}
		off += int64(used)
	}
	for used := 0; used < len(tail); {
		l := recLen(tail[used:])
		if !fn(size+int64(used), tail[used:used+l]) {
			return nil
		}
		used += l
	}
	return nil
}

func recLen(rec []byte) int {
	return nameHeader + int(binary.LittleEndian.Uint16(rec[8:])) + int(binary.LittleEndian.Uint16(rec[10:]))
}

// errStopped: a search's stop function asked it to end.
var errStopped = errors.New("stopped")

// search calls fn with the id of every live product of mp whose id or name
// contains lower (lower case, no NUL), in no order. stop is asked between
// blocks whether to give up (errStopped).
func (x *nameIndex) search(mp, lower string, stop func() bool, fn func(id []byte)) error {
	x.scanMu.RLock()
	defer x.scanMu.RUnlock()
	x.mu.RLock()
	code, ok := x.mps[mp]
	f, size, tail, err := x.f, x.size, bytes.Clone(x.tail), x.err
	x.mu.RUnlock()
	if err != nil {
		return err
	}
	if !ok || strings.IndexByte(lower, 0) >= 0 {
		return nil
	}
	q := []byte(lower)
	type hit struct {
		off int64
		rec []byte
	}
	var hits []hit
	check := func() {
		x.mu.RLock()
		for _, h := range hits {
			if x.at(binary.LittleEndian.Uint32(h.rec)) == place(h.off, len(h.rec)) {
				fn(h.rec[nameHeader : nameHeader+int(binary.LittleEndian.Uint16(h.rec[8:]))])
			}
		}
		x.mu.RUnlock()
		hits = hits[:0]
	}
	scan := func(base int64, block []byte) {
		// One bytes.Index over the block, then the record each match is in.
		rec := 0
		for from := 0; from < len(block); {
			m := bytes.Index(block[from:], q)
			if m < 0 {
				return
			}
			m += from
			for rec+recLen(block[rec:]) <= m {
				rec += recLen(block[rec:])
			}
			n := recLen(block[rec:])
			text := rec + nameHeader + int(binary.LittleEndian.Uint16(block[rec+8:]))
			if m >= text && m+len(q) <= rec+n && binary.LittleEndian.Uint32(block[rec+4:]) == code {
				hits = append(hits, hit{base + int64(rec), block[rec : rec+n]})
				from = rec + n // one hit a record
				continue
			}
			from = m + 1
		}
	}
	buf := make([]byte, 0, nameReadSize)
	for off := int64(0); off < size; {
		if stop() {
			return errStopped
		}
		n := min(int64(nameReadSize), size-off)
		buf = buf[:n]
		if _, err := f.ReadAt(buf, off); err != nil {
			return fmt.Errorf("the names file: %w", err)
		}
		// The whole records of the block.
		end := 0
		for end+nameHeader <= len(buf) && end+recLen(buf[end:]) <= len(buf) {
			end += recLen(buf[end:])
		}
		if end == 0 {
			return errors.New("the names file: a record larger than a block")
		}
		scan(off, buf[:end])
		check()
		off += int64(end)
	}
	scan(size, tail)
	check()
	return nil
}
