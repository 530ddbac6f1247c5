package catalog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// nameIndex is what the console's product search without a vendor reads:
// every product's id and name, in lower case, one record after another in a
// file of the process's own (beside the texts store, ENDCAP_CATALOG_DIR),
// searched by bytes.Index over the segments of the file that may hold the
// text. The file is read through the OS page cache, outside the Go heap; in
// memory the index keeps, per product number (statelog.Collection.ByNum),
// where its record is: 8 bytes a product, in chunks (no slack to grow
// into).
//
// A change appends the product's new record; the old one is dead (its
// number's place points elsewhere), and the file is rewritten with the live
// records only when the dead bytes outgrow the live ones. Records are
// written in segments of nameBlock bytes; the last, unwritten one is read
// from memory.
//
// Each segment written has a signature in a second file: a set of sigBits
// bits, the bit of every three consecutive bytes of its texts (gram). A
// text of three bytes or more can be in a segment only if the bits of all
// its three-byte runs are set, so a search reads the signatures (sigBytes a
// segment, 1/16 of its size) and only the segments that pass: a text that
// few products hold reads a few segments of the file, not all of it.
type nameIndex struct {
	dir string

	// scanMu is held (read) by searches for their pass over the file, and
	// by compact (write) to replace it.
	scanMu sync.RWMutex

	mu         sync.RWMutex
	f          *os.File
	sig        *os.File // the segments' signatures, sigBytes each, in segment order
	segs       []int64  // where each segment of f starts; it ends where the next starts, or at size
	segMin     []string // each segment's smallest id (of any marketplace, live or dead)
	sigBuf     []byte   // flush's signature
	size       int64    // bytes of records in f
	tail       []byte   // records after size, not yet written
	pos        [][]uint64
	live, dead int64
	mps        map[string]uint32
	err        error // the file could not be written: searches fail
	minCompact int64 // dead bytes below which compact does not rewrite

	read atomic.Int64 // bytes of records searches read from f (tests)
}

const (
	nameBlock    = 64 << 10 // bytes of records written at once: a segment
	nameReadSize = 1 << 20  // bytes of the file a search reads at once
	posChunk     = 1 << 16  // product numbers a chunk of pos holds
	nameHeader   = 12       // num u32, marketplace u32, id length u16, text length u16
	sigShift     = 15
	sigBits      = 1 << sigShift // bits of a segment's signature
	sigBytes     = sigBits / 8
	sigChunk     = 256 // signatures a search reads at once (1 MiB)
)

func newNameIndex(dir string) *nameIndex {
	return &nameIndex{dir: dir, mps: map[string]uint32{}, minCompact: 16 << 20}
}

// gram is the signature bit of the three bytes at b.
func gram(b []byte) uint32 { return gramOf(uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])) }

func gramOf(v uint32) uint32 { return v * 0x9e3779b1 >> (32 - sigShift) }

// sign sets in sig (sigBytes) the bit of every three consecutive bytes of
// the texts of recs (whole records) but those across the NUL between the
// id and the name: no text searched for spans the two.
func sign(sig, recs []byte) {
	for at := 0; at < len(recs); {
		n := recLen(recs[at:])
		text := recs[at+nameHeader+int(binary.LittleEndian.Uint16(recs[at+8:])) : at+n]
		if z := bytes.IndexByte(text, 0); z >= 0 {
			signText(sig, text[:z])
			text = text[z+1:]
		}
		signText(sig, text)
		at += n
	}
}

// minID is the smallest id of the records of recs.
func minID(recs []byte) string {
	var m []byte
	for at := 0; at < len(recs); at += recLen(recs[at:]) {
		id := recs[at+nameHeader : at+nameHeader+int(binary.LittleEndian.Uint16(recs[at+8:]))]
		if m == nil || bytes.Compare(id, m) < 0 {
			m = id
		}
	}
	return string(m)
}

func signText(sig, text []byte) {
	if len(text) < 3 {
		return
	}
	v := uint32(text[0])<<8 | uint32(text[1])
	for _, c := range text[2:] {
		v = (v<<8 | uint32(c)) & 0xffffff
		g := gramOf(v)
		sig[g>>3] |= 1 << (g & 7)
	}
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
	if x.err != errClosed {
		x.put(mp, num, id, name)
	}
	due := x.due()
	x.mu.Unlock()
	if due {
		x.compactNow()
	}
}

// put is set under mu.
func (x *nameIndex) put(mp string, num uint32, id, name string) {
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
	x.drop(num)
	due := x.due()
	x.mu.Unlock()
	if due {
		x.compactNow()
	}
}

// due says whether the dead bytes call for a rewrite of the file (under
// mu).
func (x *nameIndex) due() bool { return x.dead > max(x.live, x.minCompact) }

// compactNow rewrites the file when it is still due, once the searches
// under way are done. It takes scanMu before mu, as searches do (they take
// mu to check their hits while they hold scanMu).
func (x *nameIndex) compactNow() {
	x.scanMu.Lock()
	defer x.scanMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.due() {
		x.compact()
	}
}

// drop counts num's record dead (under mu).
func (x *nameIndex) drop(num uint32) {
	p := x.at(num)
	if p == 0 {
		return
	}
	n := int64(p & (1<<24 - 1))
	x.setAt(num, 0)
	x.live -= n
	x.dead += n
}

// flush writes the tail to the file as a segment, and its signature (under
// mu).
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
		sig, err := os.CreateTemp(x.dir, "names-sig-")
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
			x.err = err
			return
		}
		x.f, x.sig = f, sig
	}
	if x.sigBuf == nil {
		x.sigBuf = make([]byte, sigBytes)
	}
	clear(x.sigBuf)
	sign(x.sigBuf, x.tail)
	if _, err := x.f.WriteAt(x.tail, x.size); err != nil {
		x.err = err
		return
	}
	if _, err := x.sig.WriteAt(x.sigBuf, int64(len(x.segs))*sigBytes); err != nil {
		x.err = err
		return
	}
	x.segs = append(x.segs, x.size)
	x.segMin = append(x.segMin, minID(x.tail))
	x.size += int64(len(x.tail))
	x.tail = x.tail[:0]
}

// compact rewrites the file with the live records only (under scanMu and
// mu: compactNow).
func (x *nameIndex) compact() {
	x.flush()
	if x.err != nil || x.f == nil {
		return
	}
	old, oldSig, oldSize := x.f, x.sig, x.size
	x.f, x.sig, x.segs, x.segMin, x.size, x.live, x.dead = nil, nil, nil, nil, 0, 0, 0
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
	for _, f := range []*os.File{old, oldSig} {
		_ = f.Close()
		_ = os.Remove(f.Name())
	}
}

// close closes and removes the files, after the searches under way; later
// searches fail.
func (x *nameIndex) close() {
	x.scanMu.Lock()
	defer x.scanMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, f := range []*os.File{x.f, x.sig} {
		if f != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}
	x.f, x.sig, x.segs, x.segMin, x.tail = nil, nil, nil, nil, nil
	x.err = errClosed
}

// errClosed: the index was closed (the process is stopping).
var errClosed = errors.New("the names index is closed")

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
// contains lower (lower case, no NUL), in no order, but those of the
// segments it skips: beyond (nil: none) is asked, before a segment is read,
// whether the ids from the segment's smallest on are of no use to the
// caller (it keeps the smallest ids found), and the segments are read by
// their smallest id, so that a text many products hold reads the segments
// of the smallest ids only, when ids grow along the file. stop is asked
// before each read of the file whether to give up (errStopped).
func (x *nameIndex) search(mp, lower string, stop func() bool, beyond func(minID string) bool, fn func(id []byte)) error {
	x.scanMu.RLock()
	defer x.scanMu.RUnlock()
	x.mu.RLock()
	code, ok := x.mps[mp]
	f, sig, segs, mins, size, tail, err := x.f, x.sig, x.segs, x.segMin, x.size, bytes.Clone(x.tail), x.err
	x.mu.RUnlock()
	if err != nil {
		return err
	}
	if !ok || strings.IndexByte(lower, 0) >= 0 {
		return nil
	}
	q := []byte(lower)
	// The bits a segment's signature must have (none: every segment is
	// read).
	var grams []uint32
	for i := 0; i+3 <= len(q); i++ {
		grams = append(grams, gram(q[i:]))
	}
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
	// The segments whose signature has every gram, by their smallest id,
	// read in runs of adjacent ones of up to nameReadSize bytes.
	var may []int
	var sigs []byte
	for i := range segs {
		if len(grams) > 0 {
			if i%sigChunk == 0 {
				if stop() {
					return errStopped
				}
				sigs = slices.Grow(sigs[:0], sigChunk*sigBytes)[:min(sigChunk, len(segs)-i)*sigBytes]
				if _, err := sig.ReadAt(sigs, int64(i)*sigBytes); err != nil {
					return fmt.Errorf("the names signatures: %w", err)
				}
			}
			s := sigs[i%sigChunk*sigBytes:][:sigBytes]
			pass := true
			for _, g := range grams {
				if s[g>>3]&(1<<(g&7)) == 0 {
					pass = false
					break
				}
			}
			if !pass {
				continue
			}
		}
		may = append(may, i)
	}
	if beyond != nil {
		slices.SortStableFunc(may, func(a, b int) int { return strings.Compare(mins[a], mins[b]) })
	}
	var buf []byte
	runFrom, runTo := int64(-1), int64(0)
	read := func() error {
		if runFrom < 0 {
			return nil
		}
		if stop() {
			return errStopped
		}
		buf = slices.Grow(buf[:0], int(runTo-runFrom))[:runTo-runFrom]
		if _, err := f.ReadAt(buf, runFrom); err != nil {
			return fmt.Errorf("the names file: %w", err)
		}
		x.read.Add(int64(len(buf)))
		scan(runFrom, buf) // whole records: a segment ends where a record does
		check()
		runFrom = -1
		return nil
	}
	for _, i := range may {
		start, end := segs[i], size
		if i+1 < len(segs) {
			end = segs[i+1]
		}
		if runFrom >= 0 && (runTo != start || end-runFrom > nameReadSize) {
			if err := read(); err != nil {
				return err
			}
		}
		if beyond != nil && beyond(mins[i]) {
			continue
		}
		if runFrom < 0 {
			runFrom = start
		}
		runTo = end
	}
	if err := read(); err != nil {
		return err
	}
	scan(size, tail)
	check()
	return nil
}
