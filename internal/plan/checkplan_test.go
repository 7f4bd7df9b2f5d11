package plan

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kafkamender/kafkamender/internal/model"
)

// checkPlan runs a planner on snap and checks what every planner test checks: the
// snapshot is left exactly as it was, and, when reject is set, the request is rejected
// with a message containing it. It returns the plan and whether there is a plan to check.
func checkPlan(t *testing.T, snap *model.Snapshot, reject string, run func() (Plan, error)) (Plan, bool) {
	t.Helper()
	before := copySnapshot(snap)
	got, err := run()
	if !reflect.DeepEqual(before, snap) {
		t.Fatal("planning modified the snapshot")
	}
	if reject != "" {
		var re *RejectError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), reject) {
			t.Fatalf("err = %v, want a rejection containing %q", err, reject)
		}
		return Plan{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return got, true
}
