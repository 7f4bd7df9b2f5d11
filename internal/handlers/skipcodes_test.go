package handlers

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// SkipCodes, from which the metrics pre-create a series per reason, lists every skip code
// of the contract (docs/schemas/result.json, which the tests of package events keep equal
// to the SkipCode constants and to docs/contract.md).
func TestSkipCodesAreTheContracts(t *testing.T) {
	data, err := os.ReadFile("../../docs/schemas/result.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Defs struct {
			Skip struct {
				Properties struct {
					Code struct {
						Enum []string `json:"enum"`
					} `json:"code"`
				} `json:"properties"`
			} `json:"skip"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(schema.Defs.Skip.Properties.Code.Enum))
	got := slices.Sorted(slices.Values(SkipCodes()))
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("SkipCodes() = %v, want the codes of result.json %v", got, want)
	}
}
