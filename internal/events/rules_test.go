package events

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
)

// The patterns of the schemas are the decoder's own.
func TestSchemaPatternsAreTheDecoders(t *testing.T) {
	for _, tc := range []struct{ file, ptr, want string }{
		{"cloudevent.json", "/$defs/timestamp", timePattern},
		{"cloudevent.json", "/$defs/mediaType", mediaTypePattern},
		{"cloudevent.json", "/$defs/duration", durationPattern},
	} {
		got, _ := schemaNode(t, rawSchema(t, tc.file), tc.ptr)["pattern"].(string)
		if got != tc.want {
			t.Errorf("%s#%s: pattern\n%s\nwant the decoder's\n%s", tc.file, tc.ptr, got, tc.want)
		}
	}
}

// timePattern takes a date exactly when time.Parse does: every day of every month of
// common, leap and century years, and the days around them.
func TestTimePatternDates(t *testing.T) {
	for _, year := range []int{0, 1900, 1970, 2000, 2023, 2024, 2100, 2400, 9999} {
		for month := 0; month <= 13; month++ {
			for day := 0; day <= 32; day++ {
				date := fmt.Sprintf("%04d-%02d-%02d", year, month, day)
				_, err := time.Parse("2006-01-02", date)
				if got := timeRE.MatchString(date + "T00:00:00Z"); got != (err == nil) {
					t.Errorf("%s: the pattern takes it: %v; time.Parse: %v", date, got, err)
				}
			}
		}
	}
}

func TestParseTime(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"2026-11-29T10:00:00Z", time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)},
		{"2026-11-29t10:00:00z", time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)},
		{"2026-11-29T10:00:00.5+01:30", time.Date(2026, 11, 29, 8, 30, 0, 5e8, time.UTC)},
		{"2026-11-29T10:00:00.123456789-00:00", time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)},
	} {
		got, err := parseTime(tc.in)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("parseTime(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	_, err := parseTime("2026-11-29T9:00:00Z")
	if err == nil || !strings.Contains(err.Error(), `"2026-11-29T9:00:00Z" is not an RFC 3339 time`) {
		t.Errorf("err = %v", err)
	}
}

// Binary mode reads the attributes of its headers by the same rules.
func TestDecodeBinaryHeaders(t *testing.T) {
	for _, tc := range []struct{ header, value, want string }{
		{"ce-time", "2026-11-29T10:00:00Z", ""},
		{"ce-expiresat", "2026-11-29t10:00:00.5z", ""},
		{"ce-time", "2026-11-29T9:00:00Z", `ce-time: "2026-11-29T9:00:00Z" is not an RFC 3339 time`},
		{"ce-expiresat", "2026-11-29T10:00:00,5Z", `ce-expiresat: "2026-11-29T10:00:00,5Z" is not an RFC 3339 time`},
		{"ce-expiresat", "2026-11-29T10:00:00+01:60", `ce-expiresat: "2026-11-29T10:00:00+01:60" is not an RFC 3339 time`},
		{"Content-Type", "Application/JSON; charset=utf-8", ""},
		{"Content-Type", "appl\u0130cation/json", "datacontenttype: want \"application/json\", got \"appl\u0130cation/json\""},
		{"ce-datacontenttype", "application/json;charset=\"\u00fc\"", `datacontenttype: want "application/json"`},
	} {
		h := binaryHeader(TypeBrokerOverloaded)
		h[tc.header] = []string{tc.value}
		_, err := Decode(Subject("local", TypeBrokerOverloaded), h, []byte(`{"broker":1}`), schemaDecodeOptions)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %s: err = %v, want %q", tc.header, tc.value, err, tc.want)
		}
	}
}

func TestIntegerLiteral(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0", "-0": "0", "-0.0": "0", "12": "12", "-12": "-12", "1.0": "1", "1.50": "1.50", "1e2": "100",
		"1E+2": "100", "-2.5e1": "-25", "250e-1": "25", "25e-1": "25e-1", "0e999999999": "0", "1e999999999": "1e999999999",
		"1e-999999999": "1e-999999999", "0.000": "0", "123456789012345678901234567890": "123456789012345678901234567890",
		"1e30": "1e30", "1e29": "100000000000000000000000000000",
	} {
		if got := integerLiteral(in); got != want {
			t.Errorf("integerLiteral(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestStrictJSON(t *testing.T) {
	out, err := strictJSON([]byte(`{"a": 1.0, "b": [2e0, {"c": "x", "c": "y"}], "data": {"d": null, "d": true, "e": -0}}`), "")
	if got := string(out); got != `{"a":1,"b":[2,{"c":"x","c":"y"}],"data":{"d":null,"d":true,"e":0}}` {
		t.Errorf("out = %s", got)
	}
	if got, want := fmt.Sprint(err), "b[1]: member \"c\" appears twice (a member name must be unique in its object)\n"+
		"data: member \"d\" appears twice (a member name must be unique in its object)"; got != want {
		t.Errorf("err = %s\nwant %s", got, want)
	}
	if _, err := strictJSON([]byte(`{"a":1,"a":2,"a":3}`), "data"); fmt.Sprint(err) != `data: member "a" appears twice (a member name must be unique in its object)` {
		t.Errorf("three times: %v", err)
	}
	if out, err := strictJSON([]byte("{\"a\":\"\xe2\x82\"}"), ""); out != nil || fmt.Sprint(err) != "body: not UTF-8 (the byte at offset 6 is not part of a UTF-8 character)" {
		t.Errorf("not UTF-8: %s, %v", out, err)
	}
}

// The schemas' controlPattern and the decoder's unicode.IsControl are one rule.
func TestControlPatternIsUnicodeCc(t *testing.T) {
	re := regexp.MustCompile(controlPattern)
	for r := rune(0); r <= 0x3000; r++ {
		if got := re.MatchString(string(r)); got != unicode.IsControl(r) {
			t.Errorf("%U: the pattern matches: %v; unicode.IsControl: %v", r, got, unicode.IsControl(r))
		}
	}
}

func TestCheckText(t *testing.T) {
	for in, want := range map[string]string{
		"alertmanager/prod":            "",
		strings.Repeat("\u00e9", 1024): "",
		strings.Repeat("\u00e9", 1025): "1025 characters, over the limit of 1024",
		"a\nb":                         "a control character (U+000A) at byte 1",
		"\u00e9\u0085":                 "a control character (U+0085) at byte 2",
		"\xff":                         "not UTF-8",
	} {
		if err := checkText(in, MaxTextLength); fmt.Sprint(err) != want && !(want == "" && err == nil) {
			t.Errorf("checkText(%q) = %v, want %q", in, err, want)
		}
	}
}

func TestReason(t *testing.T) {
	for in, want := range map[string]string{
		"cpu 97% on broker 3":          "cpu 97% on broker 3",
		"line 1\nline 2\ttab\u0085":    "line 1 line 2 tab ",
		strings.Repeat("\u00e9", 1100): strings.Repeat("\u00e9", 1023) + "…",
		"bad \xff byte":                "bad \ufffd byte",
	} {
		got := Reason(in)
		if got != want {
			t.Errorf("Reason(%q) = %q, want %q", in, got, want)
		}
		if err := checkText(got, MaxTextLength); err != nil {
			t.Errorf("Reason(%q) = %q: %v", in, got, err)
		}
	}
}
