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
// returned JSON is nil when raw cannot be read at all; with it, the error lists only
// repeated members (the event's id can still be read, for its result).
func strictJSON(raw []byte, path string) ([]byte, error) {
	where := path
	if where == "" {
		where = "body"
	}
	if !utf8.Valid(raw) {
		return nil, fmt.Errorf("%s: not UTF-8 (the byte at offset %d is not part of a UTF-8 character)", where, invalidUTF8(raw))
	}
	w := &jsonWalker{dec: json.NewDecoder(bytes.NewReader(raw))}
	w.dec.UseNumber()
	tok, err := w.dec.Token()
	if err == nil {
		err = w.token(tok, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return w.out.Bytes(), errors.Join(w.errs...)
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

type jsonWalker struct {
	dec  *json.Decoder
	out  bytes.Buffer
	errs []error
}

// token writes the value that starts with tok, at path (see strictJSON).
func (w *jsonWalker) token(tok json.Token, path string) error {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return w.object(path)
		}
		return w.array(path)
	case json.Number:
		w.out.WriteString(integerLiteral(string(v)))
	case string:
		w.str(v)
	case bool:
		w.out.WriteString(strconv.FormatBool(v))
	case nil:
		w.out.WriteString("null")
	}
	return nil
}

func (w *jsonWalker) object(path string) error {
	where := path
	if where == "" {
		where = "body"
	}
	w.out.WriteByte('{')
	seen := map[string]int{}
	for i := 0; w.dec.More(); i++ {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		if seen[name]++; seen[name] == 2 {
			w.errs = append(w.errs, fmt.Errorf("%s: member %s appears twice (a member name must be unique in its object)", where, clip(name)))
		}
		if i > 0 {
			w.out.WriteByte(',')
		}
		w.str(name)
		w.out.WriteByte(':')
		if tok, err = w.dec.Token(); err != nil {
			return err
		}
		member := name
		if path != "" {
			member = path + "." + name
		}
		if err := w.token(tok, member); err != nil {
			return err
		}
	}
	if _, err := w.dec.Token(); err != nil { // }
		return err
	}
	w.out.WriteByte('}')
	return nil
}

func (w *jsonWalker) array(path string) error {
	w.out.WriteByte('[')
	for i := 0; w.dec.More(); i++ {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		if i > 0 {
			w.out.WriteByte(',')
		}
		elem := ""
		if _, nested := tok.(json.Delim); nested { // only a nested object can name its path
			elem = fmt.Sprintf("%s[%d]", path, i)
		}
		if err := w.token(tok, elem); err != nil {
			return err
		}
	}
	if _, err := w.dec.Token(); err != nil { // ]
		return err
	}
	w.out.WriteByte(']')
	return nil
}

func (w *jsonWalker) str(s string) {
	b, _ := json.Marshal(s) // a string always encodes
	w.out.Write(b)
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
