package attribution

import (
	"cmp"
	"strconv"
	"testing"

	"github.com/google/uuid"

	"github.com/endcap/endcap/storage/clickhouse"
)

// The copies go to ClickHouse in the order of their tables' sorting keys,
// whatever the batch's order, so that the server writes each block without
// sorting it: attribution_touches_raw (marketplace_id, opaque_user_id, kind,
// event_id, kafka_partition, kafka_offset), attribution_purchases_raw
// (marketplace_id, opaque_user_id, event_id, kafka_partition, kafka_offset).
func TestCopiesInSortingKeyOrder(t *testing.T) {
	mps := []uuid.UUID{uuid.MustParse("9e749a0c-8db8-4213-8a93-d1df82c9d071"), uuid.MustParse("1e749a0c-8db8-4213-8a93-d1df82c9d071")}
	kinds := []string{"click", "impression"} // as strings, "click" sorts first; as the Enum8, impression (1)
	var touches []touchRow
	var purchases []purchaseRow
	for i := range 200 {
		mp := mps[i%7/6]
		user := "u-" + strconv.Itoa(i%13)
		touches = append(touches, touchRow{mp: mp, user: user, t: Touch{Kind: kinds[i%2], EventID: "e-" + strconv.Itoa(i%17)},
			partition: int32(i % 3), offset: int64(1000 - i)})
		purchases = append(purchases, purchaseRow{mp: mp, p: Purchase{UserID: user, EventID: "p-" + strconv.Itoa(i%11)},
			partition: int32(i % 3), offset: int64(1000 - i)})
	}
	enum := map[string]int{"impression": 1, "click": 2}
	cols := touchCols(touches)
	mp, user, kind, event := cols[0].([]uuid.UUID), values(cols[1]), values(cols[2]), values(cols[3])
	part, off := cols[20].([]int32), cols[21].([]int64)
	for i := 1; i < len(touches); i++ {
		c := firstNonZero(
			cmp.Compare(string(mp[i-1][:]), string(mp[i][:])), cmp.Compare(user[i-1], user[i]), cmp.Compare(enum[kind[i-1]], enum[kind[i]]),
			cmp.Compare(event[i-1], event[i]), cmp.Compare(part[i-1], part[i]), cmp.Compare(off[i-1], off[i]))
		if c > 0 {
			t.Fatalf("touch row %d (%s %s %s %s %d/%d) after row %d (%s %s %s %s %d/%d): not in the sorting key's order",
				i, mp[i], user[i], kind[i], event[i], part[i], off[i], i-1, mp[i-1], user[i-1], kind[i-1], event[i-1], part[i-1], off[i-1])
		}
	}
	cols = purchaseCols(purchases)
	mp, user, event = cols[0].([]uuid.UUID), cols[1].([]string), cols[2].([]string)
	part, off = cols[11].([]int32), cols[12].([]int64)
	for i := 1; i < len(purchases); i++ {
		c := firstNonZero(cmp.Compare(string(mp[i-1][:]), string(mp[i][:])), cmp.Compare(user[i-1], user[i]),
			cmp.Compare(event[i-1], event[i]), cmp.Compare(part[i-1], part[i]), cmp.Compare(off[i-1], off[i]))
		if c > 0 {
			t.Fatalf("purchase row %d (%s %s %s %d/%d) after row %d: not in the sorting key's order", i, mp[i], user[i], event[i], part[i], off[i], i-1)
		}
	}
}

// values are a String column's values.
func values(col any) []string {
	if s, ok := col.(*clickhouse.Strings); ok {
		out := make([]string, s.Len())
		for i := range out {
			out[i] = s.At(i)
		}
		return out
	}
	return col.([]string)
}

// firstNonZero is the first of the comparisons that is not 0.
func firstNonZero(cs ...int) int {
	for _, c := range cs {
		if c != 0 {
			return c
		}
	}
	return 0
}
