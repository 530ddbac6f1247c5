package redisstore

import "strings"

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Slot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of its hash
// tag (the text between the first "{" and the first "}" after it, when
// that is not empty) or of the whole key, modulo Slots. Keys of one slot
// are on one master, and only they can be used together by one script or
// transaction.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crc16tab[byte(crc>>8)^key[i]]
	}
	return int(crc) % Slots
}

// crc16tab is the table of CRC16 (XMODEM: polynomial 0x1021, initial 0).
var crc16tab = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
