package loadgen

import (
	"math/rand/v2"
	"strconv"
	"time"
)

// bodyBuilder writes POST /v2/events bodies with append/strconv into a caller's buffer. One per worker: it
// is not safe for concurrent use. Its output is deterministic for a given seed and worker except for the
// event ids (run-random prefix) and occurredAt (time of sending).
type bodyBuilder struct {
	rng      *rand.Rand
	counts   [4]int // impressions, clicks, purchases, pageviews
	users    int
	products int

	// idPrefix is "rrrrrrrr-rrrr-4rrr-8www-": 60 run-random bits (the first ones replaced by
	// EventsConfig.IDPrefix when it is set), the UUID version and variant nibbles and the 12-bit worker
	// number; 12 hex digits complete a UUID-shaped id: 10 of the worker's request number and 2 of the
	// event's index in its request (a batch has at most 200). So ids are unique in a run (worker, request,
	// index) and across runs (random prefix), and the id less its last 2 digits is its request's key
	// (requestKey): the events stored of one request are those whose id starts with it.
	idPrefix [24]byte
	seq      uint64 // events written by this worker

	ts   [32]byte // scratch for occurredAt
	imps []interaction
	clks []interaction
}

// interaction is what an impression shares with the clicks that follow it (same user, product, place).
type interaction struct {
	user, product int
	page          pageRef
	position      int
	pageNum       int
	mobile        bool
}

// pageRef is a page of the shop: its kind and a number whose meaning depends on the kind.
type pageRef struct {
	kind int // pageSearch, pageCategory, pagePDP, pageHome
	n    int // search term index, category number, viewed product
}

const (
	pageSearch = iota
	pageCategory
	pagePDP
	pageHome
)

const (
	pageSize   = 20
	categories = 200
	vendors    = 1000
)

var searchTerms = [...]string{
	"shoes", "tv", "coffee", "headphones", "laptop", "jacket", "shampoo", "toys", "phone", "chair",
	"lamp", "sneakers", "tea", "dress", "watch", "camera", "bike", "tent", "soap", "pasta",
	"wine", "desk", "mouse", "keyboard", "blender", "kettle", "pillow", "towel", "backpack", "socks",
	"sunglasses", "perfume",
}

var pageTypes = [...]string{pageSearch: "search", pageCategory: "category", pagePDP: "PDP", pageHome: "home"}

const hexDigits = "0123456789abcdef"

func newBodyBuilder(runID [8]byte, worker int, seed int64, batch, users, products int) *bodyBuilder {
	b := &bodyBuilder{
		rng:      rand.New(rand.NewPCG(uint64(seed), uint64(worker)+0x9e3779b97f4a7c15)),
		counts:   splitBatch(batch),
		users:    users,
		products: products,
	}
	p := b.idPrefix[:0]
	for i := 0; i < 4; i++ {
		p = append(p, hexDigits[runID[i]>>4], hexDigits[runID[i]&15])
	}
	p = append(p, '-', hexDigits[runID[4]>>4], hexDigits[runID[4]&15], hexDigits[runID[5]>>4], hexDigits[runID[5]&15])
	p = append(p, '-', '4', hexDigits[runID[6]&15], hexDigits[runID[7]>>4], hexDigits[runID[7]&15])
	p = append(p, '-', '8', hexDigits[(worker>>8)&15], hexDigits[(worker>>4)&15], hexDigits[worker&15], '-') //nolint:ineffassign,staticcheck // the appends fill the array b.idPrefix in place: it has room for all of them
	b.imps = make([]interaction, b.counts[0])
	b.clks = make([]interaction, b.counts[1])
	return b
}

// setIDPrefix writes p (checked by checkIDPrefix) over the start of the run-random part of the ids.
func (b *bodyBuilder) setIDPrefix(p string) { copy(b.idPrefix[:8], p) }

// requestKeyLen is the length of a request's key: an event id less its last 2 hex digits.
const requestKeyLen = len("rrrrrrrr-rrrr-4rrr-8www-") + 10

// lastRequestKey is the key of the request built last (every id of its events starts with it); "" before
// the first build.
func (b *bodyBuilder) lastRequestKey() string {
	if b.seq == 0 {
		return ""
	}
	req := (b.seq - 1) / uint64(b.events())
	var k [requestKeyLen]byte
	copy(k[:], b.idPrefix[:])
	for i, shift := len(b.idPrefix), 36; shift >= 0; i, shift = i+1, shift-4 {
		k[i] = hexDigits[(req>>uint(shift))&15]
	}
	return string(k[:])
}

// sizeHint is a generous estimate of a body's size, to pre-size buffers.
func (b *bodyBuilder) sizeHint() int {
	return 64 + 420*(b.counts[0]+b.counts[1]) + 330*b.counts[2] + 200*b.counts[3]
}

// events is the number of events in every body.
func (b *bodyBuilder) events() int { return b.counts[0] + b.counts[1] + b.counts[2] + b.counts[3] }

// build appends one request body to dst[:0] and returns it. now is the occurredAt of every event.
func (b *bodyBuilder) build(dst []byte, now time.Time) []byte {
	ts := now.UTC().AppendFormat(b.ts[:0], "2006-01-02T15:04:05.000Z07:00")
	dst = append(dst[:0], '{')
	if n := b.counts[0]; n > 0 {
		dst = openArray(dst, `"impressions":[`)
		for i := 0; i < n; i++ {
			b.imps[i] = b.randInteraction()
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = b.appendInteraction(dst, ts, &b.imps[i], false)
		}
		dst = append(dst, ']')
	}
	if n := b.counts[1]; n > 0 {
		dst = openArray(dst, `"clicks":[`)
		for i := 0; i < n; i++ {
			if len(b.imps) > 0 {
				b.clks[i] = b.imps[i%len(b.imps)] // a click follows an impression of this batch
			} else {
				b.clks[i] = b.randInteraction()
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = b.appendInteraction(dst, ts, &b.clks[i], true)
		}
		dst = append(dst, ']')
	}
	if n := b.counts[2]; n > 0 {
		dst = openArray(dst, `"purchases":[`)
		for i := 0; i < n; i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = b.appendPurchase(dst, ts, i)
		}
		dst = append(dst, ']')
	}
	return b.appendPageviewsAndClose(dst, ts)
}

// appendPageviewsAndClose writes the body's page views, if any, and closes
// the body (the last key of both the organic and the sponsored bodies).
func (b *bodyBuilder) appendPageviewsAndClose(dst, ts []byte) []byte {
	if n := b.counts[3]; n > 0 {
		dst = openArray(dst, `"pageviews":[`)
		for i := 0; i < n; i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = b.appendPageview(dst, ts)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// openArray writes `"name":[`, after a comma unless it is the first key of the body.
func openArray(dst []byte, key string) []byte {
	if dst[len(dst)-1] != '{' {
		dst = append(dst, ',')
	}
	return append(dst, key...)
}

func (b *bodyBuilder) randPage() pageRef {
	switch r := b.rng.IntN(100); {
	case r < 40:
		return pageRef{pageSearch, b.rng.IntN(len(searchTerms))}
	case r < 70:
		return pageRef{pageCategory, b.rng.IntN(categories)}
	case r < 85:
		return pageRef{pagePDP, b.rng.IntN(b.products)}
	default:
		return pageRef{pageHome, 0}
	}
}

func (b *bodyBuilder) randInteraction() interaction {
	return interaction{
		user:     b.rng.IntN(b.users),
		product:  b.rng.IntN(b.products),
		page:     b.randPage(),
		position: 1 + b.rng.IntN(pageSize),
		pageNum:  1 + b.rng.IntN(3),
		mobile:   b.rng.IntN(10) < 6,
	}
}

// appendHead writes `{"id":"…","occurredAt":"…","opaqueUserId":"u-N"`.
func (b *bodyBuilder) appendHead(dst, ts []byte, user int) []byte {
	dst = append(dst, `{"id":"`...)
	dst = append(dst, b.idPrefix[:]...)
	n := uint64(b.events())
	s := (b.seq/n)<<8 | b.seq%n
	b.seq++
	for shift := 44; shift >= 0; shift -= 4 {
		dst = append(dst, hexDigits[(s>>uint(shift))&15])
	}
	dst = append(dst, `","occurredAt":"`...)
	dst = append(dst, ts...)
	dst = append(dst, `","opaqueUserId":"u-`...)
	dst = strconv.AppendInt(dst, int64(user), 10)
	return append(dst, '"')
}

// appendPageObj writes `{"type":"…","pageId":"…"}`.
func appendPageObj(dst []byte, p pageRef) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, pageTypes[p.kind]...)
	dst = append(dst, `","pageId":"`...)
	switch p.kind {
	case pageSearch:
		dst = append(dst, "search-"...)
		dst = append(dst, searchTerms[p.n]...)
	case pageCategory:
		dst = append(dst, "c-"...)
		dst = strconv.AppendInt(dst, int64(p.n), 10)
	case pagePDP:
		dst = append(dst, "p-"...)
		dst = strconv.AppendInt(dst, int64(p.n), 10)
	default:
		dst = append(dst, "home"...)
	}
	return append(dst, `"}`...)
}

// appendPath writes the placement path of a page (quoted).
func appendPath(dst []byte, p pageRef) []byte {
	dst = append(dst, '"')
	switch p.kind {
	case pageSearch:
		dst = append(dst, "/search?q="...)
		dst = append(dst, searchTerms[p.n]...)
	case pageCategory:
		dst = append(dst, "/c/c-"...)
		dst = strconv.AppendInt(dst, int64(p.n), 10)
	case pagePDP:
		dst = append(dst, "/p/p-"...)
		dst = strconv.AppendInt(dst, int64(p.n), 10)
	default:
		dst = append(dst, '/')
	}
	return append(dst, '"')
}

func (b *bodyBuilder) appendInteraction(dst, ts []byte, it *interaction, click bool) []byte {
	dst = b.appendHead(dst, ts, it.user)
	dst = append(dst, `,"entity":{"type":"product","id":"p-`...)
	dst = strconv.AppendInt(dst, int64(it.product), 10)
	dst = append(dst, `"},"placement":{"path":`...)
	dst = appendPath(dst, it.page)
	dst = append(dst, `,"position":`...)
	dst = strconv.AppendInt(dst, int64(it.position), 10)
	dst = append(dst, `,"page":`...)
	dst = strconv.AppendInt(dst, int64(it.pageNum), 10)
	dst = append(dst, `,"pageSize":`...)
	dst = strconv.AppendInt(dst, pageSize, 10)
	dst = append(dst, `},"page":`...)
	dst = appendPageObj(dst, it.page)
	if it.mobile {
		dst = append(dst, `,"deviceType":"mobile","channel":"onsite"`...)
	} else {
		dst = append(dst, `,"deviceType":"desktop","channel":"onsite"`...)
	}
	if click {
		if b.rng.IntN(10) == 0 {
			dst = append(dst, `,"clickType":"add-to-cart"`...)
		} else {
			dst = append(dst, `,"clickType":"product"`...)
		}
	}
	return append(dst, '}')
}

func (b *bodyBuilder) appendPurchase(dst, ts []byte, i int) []byte {
	// A purchase is made by a user who clicked in this batch, and its first item is the clicked product.
	user, product := b.rng.IntN(b.users), b.rng.IntN(b.products)
	if len(b.clks) > 0 {
		c := &b.clks[i%len(b.clks)]
		user, product = c.user, c.product
	}
	dst = b.appendHead(dst, ts, user)
	dst = append(dst, `,"items":[`...)
	n := 1 + b.rng.IntN(3)
	for j := 0; j < n; j++ {
		if j > 0 {
			dst = append(dst, ',')
			product = b.rng.IntN(b.products)
		}
		cents := 99 + b.rng.IntN(19901) // 0.99 .. 199.99, always > 0
		dst = append(dst, `{"productId":"p-`...)
		dst = strconv.AppendInt(dst, int64(product), 10)
		dst = append(dst, `","unitPrice":`...)
		dst = strconv.AppendInt(dst, int64(cents/100), 10)
		c := cents % 100
		dst = append(dst, '.', byte('0'+c/10), byte('0'+c%10))
		dst = append(dst, `,"quantity":`...)
		dst = strconv.AppendInt(dst, int64(1+b.rng.IntN(3)), 10)
		dst = append(dst, `,"vendorId":"v-`...)
		dst = strconv.AppendInt(dst, int64(product%vendors), 10)
		dst = append(dst, `"}`...)
	}
	return append(dst, "]}"...)
}

func (b *bodyBuilder) appendPageview(dst, ts []byte) []byte {
	dst = b.appendHead(dst, ts, b.rng.IntN(b.users))
	dst = append(dst, `,"page":`...)
	dst = appendPageObj(dst, b.randPage())
	return append(dst, '}')
}
