package events

import (
	"reflect"
	"strings"
)

// FieldKind is the JSON kind of a data field of an event type: "string", "integer",
// "boolean", "duration" (a Go duration string), or a list of one of those ("[]string",
// "[]integer").
type FieldKind string

// DataField returns the kind of the data field named field (its JSON name) of events of
// type typ, and whether there is such a field.
func DataField(typ, field string) (FieldKind, bool) {
	t := payloadType(typ)
	if t == nil {
		return "", false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != field {
			continue
		}
		k := kindOf(f.Type)
		return k, k != ""
	}
	return "", false
}

func payloadType(typ string) reflect.Type {
	p := newPayload(typ)
	if p == nil {
		return nil
	}
	return reflect.TypeOf(p).Elem()
}

func kindOf(t reflect.Type) FieldKind {
	if t == reflect.TypeFor[Duration]() {
		return "duration"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return kindOf(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Slice:
		if e := kindOf(t.Elem()); e == "string" || e == "integer" {
			return "[]" + e
		}
	}
	return ""
}
