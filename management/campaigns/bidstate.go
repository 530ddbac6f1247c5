package campaigns

import (
	"encoding/json"
	"unsafe"
)

// A marketplace holds hundreds of thousands of bids and campaigns in every
// process, and each string field decoded on its own is one more heap object
// for the garbage collector to mark on every cycle. So the decoders below
// pack an entity's free-text strings into one allocation, and make the
// strings that can only be one of the package's constants those constants.
// The values are the same as a plain decode's.

// UnmarshalJSON decodes a bid's stored state (the entities log's form, which
// encoding/json writes from the struct's tags) and packs it: the id, the
// campaign id and the target share one allocation, and the target type is
// the package's constant.
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
	b.TargetType = canonical(b.TargetType, TargetProduct, TargetCategory, TargetKeyword)
	packStrings(&b.ID, &b.CampaignID, &b.Target)
}

// UnmarshalJSON decodes a campaign's stored state and packs it: the id, the
// vendor id, the name and the billing contact id share one allocation, and
// the type and the charge type are the package's constants.
func (c *Campaign) UnmarshalJSON(data []byte) error {
	type plain Campaign // without this method
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*c = Campaign(p)
	c.Type = canonical(c.Type, TypeListings, TypeBanners, TypeAutomated)
	c.ChargeType = canonical(c.ChargeType, ChargeCPC, ChargeCPM)
	packStrings(&c.ID, &c.VendorID, &c.Name, &c.BillingContactID)
	return nil
}

// canonical returns the constant among consts equal to s (its bytes, not
// the decoded copy's), or s.
func canonical(s string, consts ...string) string {
	for _, c := range consts {
		if s == c {
			return c
		}
	}
	return s
}

// packStrings copies the strings into one allocation, in order, and points
// each at its copy.
func packStrings(fields ...*string) {
	n := 0
	for _, f := range fields {
		n += len(*f)
	}
	if n == 0 {
		return
	}
	buf := make([]byte, 0, n)
	for _, f := range fields {
		buf = append(buf, *f...)
	}
	all := unsafe.String(unsafe.SliceData(buf), n) // buf is never written again
	at := 0
	for _, f := range fields {
		l := len(*f)
		*f = all[at : at+l]
		at += l
	}
}
