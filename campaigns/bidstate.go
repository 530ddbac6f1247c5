package campaigns

import (
	"encoding/json"
	"unsafe"
)

// UnmarshalJSON decodes a bid's stored state (the entities log's form, which
// encoding/json writes from the struct's tags) and packs it for memory: a
// marketplace holds hundreds of thousands of bids in every process, and
// each string field decoded on its own is one more heap object for the
// garbage collector to mark on every cycle. So the id, the campaign id and
// the target share one allocation, and the target type is the package's
// constant. The values are the same as a plain decode's.
func (b *Bid) UnmarshalJSON(data []byte) error {
	type plain Bid // without this method
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*b = Bid(p)
	b.pack()
	return nil
}

// pack makes ID, CampaignID and Target share one allocation and TargetType
// the package's constant.
func (b *Bid) pack() {
	for _, c := range [...]string{TargetProduct, TargetCategory, TargetKeyword} {
		if b.TargetType == c {
			b.TargetType = c // the constant's bytes, not the decoded copy's
		}
	}
	n := len(b.ID) + len(b.CampaignID) + len(b.Target)
	if n == 0 {
		return
	}
	buf := make([]byte, 0, n)
	buf = append(append(append(buf, b.ID...), b.CampaignID...), b.Target...)
	all := unsafe.String(unsafe.SliceData(buf), n) // buf is never written again
	i, c := len(b.ID), len(b.ID)+len(b.CampaignID)
	b.ID, b.CampaignID, b.Target = all[:i], all[i:c], all[c:]
}
