package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// strictJSON reads raw, one valid JSON value, as the contract reads JSON, where
// encoding/json is lenient: text that is not UTF-8 is refused (encoding/json would replace
// it with U+FFFD), and so is a member name given twice in one object (encoding/json keeps
// the last, other parsers the first, or refuse). It returns raw re-encoded, every number
// whose value is an integer written as one ("1.0", "1e2", "-0" as 1, 100, 0): JSON has one
// kind of number and JSON Schema's "integer" is any number without a fraction, so the
// integer fields encoding/json decodes next take them too.
//
// path names raw in messages: "" for an event's body, "data" for binary mode's. The
// returned JSON is nil when raw is not UTF-8; with it, the error lists only repeated
// members (the event's id can still be read, for its result).
func strictJSON(raw []byte, path string) (out []byte, err error) {
	if !utf8.Valid(raw) {
		return nil, fmt.Errorf("%s: not UTF-8 (the byte at offset %d is not part of a UTF-8 character)", where(path), invalidUTF8(raw))
	}
	defer func() {
		if recover() != nil { // raw is valid JSON: only a mistake of the walker gets here
			out, err = nil, fmt.Errorf("%s: not valid JSON", where(path))
		}
	}()
	w := &jsonWalker{in: raw, out: make([]byte, 0, len(raw))}
	w.value(path)
	return w.out, errors.Join(w.errs...)
}

// where names path in messages: "body" for the event's whole body.
func where(path string) string {
	if path == "" {
		return "body"
	}
	return path
}

// invalidUTF8 returns the offset of the first byte of b that is not part of a UTF-8
// character.
func invalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// jsonWalker copies valid JSON from in to out, value by value (see strictJSON).
type jsonWalker struct {
	in   []byte
	at   int
	out  []byte
	errs []error
}

func (w *jsonWalker) space() {
	for w.at < len(w.in) {
		switch w.in[w.at] {
		case ' ', '\t', '\n', '\r':
			w.at++
		default:
			return
		}
	}
}

// value copies the value at w.at, at path (see strictJSON).
func (w *jsonWalker) value(path string) {
	w.space()
	switch c := w.in[w.at]; {
	case c == '{':
		w.object(path)
	case c == '[':
		w.array(path)
	case c == '"':
		w.out = append(w.out, w.str()...)
	case c == 't', c == 'n':
		w.out = append(w.out, w.in[w.at:w.at+4]...)
		w.at += 4
	case c == 'f':
		w.out = append(w.out, "false"...)
		w.at += 5
	default:
		start := w.at
		for w.at < len(w.in) && strings.IndexByte("+-0123456789.eE", w.in[w.at]) >= 0 {
			w.at++
		}
		if lit := w.in[start:w.at]; bytes.ContainsAny(lit, ".eE") || bytes.Equal(lit, []byte("-0")) {
			w.out = append(w.out, integerLiteral(string(lit))...)
		} else {
			w.out = append(w.out, lit...)
		}
	}
	w.space()
}

// str returns the string at w.at, as written, and moves past it.
func (w *jsonWalker) str() []byte {
	start := w.at
	for w.at++; w.in[w.at] != '"'; w.at++ {
		if w.in[w.at] == '\\' {
			w.at++
		}
	}
	w.at++
	return w.in[start:w.at]
}

func (w *jsonWalker) object(path string) {
	w.out = append(w.out, '{')
	w.at++
	var seen map[string]int
	for first := true; ; first = false {
		w.space()
		if w.in[w.at] == '}' {
			break
		}
		if !first {
			w.at++ // ,
			w.space()
			w.out = append(w.out, ',')
		}
		raw := w.str()
		name := string(raw[1 : len(raw)-1])
		if bytes.IndexByte(raw, '\\') >= 0 {
			_ = json.Unmarshal(raw, &name) // valid JSON: a string
		}
		if seen == nil {
			seen = map[string]int{}
		}
		if seen[name]++; seen[name] == 2 {
			w.errs = append(w.errs, fmt.Errorf("%s: member %s appears twice (a member name must be unique in its object)", where(path), clip(name)))
		}
		w.out = append(w.out, raw...)
		w.space()
		w.at++ // :
		w.out = append(w.out, ':')
		member := name
		if path != "" {
			member = path + "." + name
		}
		w.value(member)
	}
	w.at++
	w.out = append(w.out, '}')
}

func (w *jsonWalker) array(path string) {
	w.out = append(w.out, '[')
	w.at++
	for i := 0; ; i++ {
		w.space()
		if w.in[w.at] == ']' {
			break
		}
		if i > 0 {
			w.at++ // ,
			w.out = append(w.out, ',')
		}
		elem := ""
		if w.space(); w.in[w.at] == '{' || w.in[w.at] == '[' { // only a nested object names its path
			elem = fmt.Sprintf("%s[%d]", path, i)
		}
		w.value(elem)
	}
	w.at++
	w.out = append(w.out, ']')
}

// listEntries returns how many entries the JSON array raw has and which of them are null;
// ok is false when raw is not an array.
func listEntries(raw []byte) (n int, nulls []int, ok bool) {
	w := &jsonWalker{in: raw}
	w.space()
	if w.at == len(raw) || raw[w.at] != '[' {
		return 0, nil, false
	}
	w.at++
	for ; ; n++ {
		w.space()
		if raw[w.at] == ']' {
			return n, nulls, true
		}
		if n > 0 {
			w.at++ // ,
			w.space()
		}
		if raw[w.at] == 'n' {
			nulls = append(nulls, n)
		}
		w.value("")
		w.out = w.out[:0]
	}
}

// maxIntegerDigits bounds the integers integerLiteral writes out: far beyond every limit of
// the contract, and short enough that an exponent cannot make it a long string.
const maxIntegerDigits = 30

// integerLiteral returns the JSON number lit written as an integer, when its value is one
// of at most maxIntegerDigits digits ("1.0", "1e2", "-0", "0.5e1" give 1, 100, 0, 5), and
// lit itself otherwise (a fraction, or an integer too large for any field).
func integerLiteral(lit string) string {
	if !strings.ContainsAny(lit, ".eE") {
		if strings.Trim(lit, "-0") == "" {
			return "0" // -0
		}
		return lit // already an integer
	}
	digits, exp, neg := decimal(lit)
	if digits == "" {
		return "0"
	}
	if exp < 0 || len(digits)+exp > maxIntegerDigits {
		return lit
	}
	out := digits + strings.Repeat("0", exp)
	if neg {
		out = "-" + out
	}
	return out
}

// integral reports whether the JSON number lit is an integer, of any size.
func integral(lit string) bool {
	digits, exp, _ := decimal(lit)
	return digits == "" || exp >= 0
}

// decimal returns the JSON number lit as digits × 10^exp: digits without leading or
// trailing zeros ("" for zero). An exponent beyond five digits reads as ±99999, beyond
// every integer of maxIntegerDigits digits and every fraction a field could take.
func decimal(lit string) (digits string, exp int, neg bool) {
	s, neg := strings.CutPrefix(lit, "-")
	mantissa := s
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mantissa = s[:i]
		e := strings.TrimLeft(strings.TrimLeft(s[i+1:], "+-"), "0")
		if len(e) > 5 {
			e = "99999"
		}
		exp, _ = strconv.Atoi("0" + e)
		if strings.HasPrefix(s[i+1:], "-") {
			exp = -exp
		}
	}
	whole, frac, _ := strings.Cut(mantissa, ".")
	digits = strings.TrimLeft(whole+frac, "0")
	exp -= len(frac)
	for strings.HasSuffix(digits, "0") {
		digits = digits[:len(digits)-1]
		exp++
	}
	return digits, exp, neg
}
