package bidtoken

// A strict base64url decoder (RFC 4648 §5, no padding) into a fixed buffer. Unlike encoding/base64 it
// takes a string without allocating, and it accepts exactly the strings Encode writes: only the 64
// alphabet characters (no '=', no CR/LF, which encoding/base64 silently skips), a length that is not
// 1 mod 4, and zero unused bits in the last character. So every token has exactly one string form.

const b64alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

var b64values = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := range len(b64alphabet) {
		t[b64alphabet[i]] = byte(i)
	}
	return t
}()

// decodeBase64 decodes s into buf and returns the number of bytes, or false if s is empty, too long for
// buf, or not canonical unpadded base64url.
func decodeBase64(buf *[maxBytes]byte, s string) (int, bool) {
	if len(s) == 0 || len(s) > MaxLen || len(s)%4 == 1 {
		return 0, false
	}
	n := 0
	i := 0
	for ; i+4 <= len(s); i += 4 {
		a, b, c, d := b64values[s[i]], b64values[s[i+1]], b64values[s[i+2]], b64values[s[i+3]]
		if (a|b|c|d)&0xc0 != 0 {
			return 0, false
		}
		v := uint32(a)<<18 | uint32(b)<<12 | uint32(c)<<6 | uint32(d)
		buf[n], buf[n+1], buf[n+2] = byte(v>>16), byte(v>>8), byte(v)
		n += 3
	}
	switch len(s) - i {
	case 2:
		a, b := b64values[s[i]], b64values[s[i+1]]
		if (a|b)&0xc0 != 0 || b&0x0f != 0 {
			return 0, false
		}
		buf[n] = a<<2 | b>>4
		n++
	case 3:
		a, b, c := b64values[s[i]], b64values[s[i+1]], b64values[s[i+2]]
		if (a|b|c)&0xc0 != 0 || c&0x03 != 0 {
			return 0, false
		}
		buf[n], buf[n+1] = a<<2|b>>4, b<<4|c>>2
		n += 2
	}
	return n, true
}
