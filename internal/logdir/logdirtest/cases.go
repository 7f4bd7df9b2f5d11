package logdirtest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kafkamender/kafkamender/internal/logdir"
)

// MoveCase is the state before a move of TP from From to To, and the checks of what the
// move may leave.
type MoveCase struct {
	From, To string
	TP       logdir.TP
	folder   map[string]string                    // snapshot of From/TP
	entries  map[string]*logdir.Entry             // From's entries of TP, per file
	others   map[string]map[string][]logdir.Entry // per dir, per file: the other entries
}

// NewMoveCase records the state before the move.
func NewMoveCase(t testing.TB, from, to, tp string) *MoveCase {
	t.Helper()
	p, err := logdir.ParseTP(tp)
	if err != nil {
		t.Fatal(err)
	}
	c := &MoveCase{From: from, To: to, TP: p, folder: Snapshot(t, filepath.Join(from, tp)),
		entries: map[string]*logdir.Entry{}, others: map[string]map[string][]logdir.Entry{}}
	if len(c.folder) == 0 {
		t.Fatalf("%s has no %s", from, tp)
	}
	for name, cp := range Checkpoints(t, from) {
		if e, ok := cp.Lookup(p); ok {
			c.entries[name] = &e
		}
	}
	c.others = otherEntries(t, p, from, to)
	return c
}

func otherEntries(t testing.TB, tp logdir.TP, dirs ...string) map[string]map[string][]logdir.Entry {
	out := map[string]map[string][]logdir.Entry{}
	for _, dir := range dirs {
		out[dir] = map[string][]logdir.Entry{}
		for name, cp := range Checkpoints(t, dir) {
			out[dir][name] = others(cp, tp)
		}
	}
	return out
}

// CheckInterrupted checks what a move interrupted at any point may leave: no folder
// Kafka fails on, checkpoint files that parse, a whole copy of the partition in at
// least one dir (a folder of the partition is always whole), every entry of the
// partition (with its offset) in one dir at least, and the other entries as they were.
func (c *MoveCase) CheckInterrupted(t testing.TB) {
	t.Helper()
	NoStrayFolders(t, c.From)
	NoStrayFolders(t, c.To)
	src, dst := c.wholeFolder(t, c.From), c.wholeFolder(t, c.To)
	if !src && !dst {
		t.Fatalf("%s is in neither %s nor %s", c.TP, c.From, c.To)
	}
	fromCPs, toCPs := Checkpoints(t, c.From), Checkpoints(t, c.To)
	for _, name := range logdir.CheckpointFiles {
		want := c.entries[name]
		f, fok := fromCPs[name].Lookup(c.TP)
		g, gok := toCPs[name].Lookup(c.TP)
		switch {
		case want == nil && (fok || gok):
			t.Errorf("%s: %s got an entry it did not have", name, c.TP)
		case want != nil && !fok && !gok:
			t.Errorf("%s: the entry %s %d is in neither dir", name, c.TP, want.Offset)
		case fok && f != *want, gok && g != *want:
			t.Errorf("%s: %s has another offset than %d: from %v, to %v", name, c.TP, want.Offset, f, g)
		case !src && fok:
			t.Errorf("%s: the source folder is gone, but %s still lists %s", name, c.From, c.TP)
		case !src && !gok && want != nil:
			t.Errorf("%s: the source folder is gone, but %s lacks %s", name, c.To, c.TP)
		}
	}
	c.checkOthers(t, fromCPs, toCPs)
}

// CheckDone checks a finished move: the folder only in To, identical to the source (mtimes
// included), the entries only in To with the same offsets, the other entries as they
// were, no staging or temporary files, nothing Inspect objects to.
func (c *MoveCase) CheckDone(t testing.TB) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(c.From, c.TP.String())); !os.IsNotExist(err) {
		t.Errorf("the source %s is still there (%v)", filepath.Join(c.From, c.TP.String()), err)
	}
	if !c.wholeFolder(t, c.To) {
		t.Fatalf("%s has no %s", c.To, c.TP)
	}
	fromCPs, toCPs := Checkpoints(t, c.From), Checkpoints(t, c.To)
	for _, name := range logdir.CheckpointFiles {
		if _, ok := fromCPs[name].Lookup(c.TP); ok {
			t.Errorf("%s: %s still lists %s", name, c.From, c.TP)
		}
		g, ok := toCPs[name].Lookup(c.TP)
		if want := c.entries[name]; want != nil && (!ok || g != *want) {
			t.Errorf("%s: %s has %v (present: %v), want %v", name, c.To, g, ok, *want)
		} else if want == nil && ok {
			t.Errorf("%s: %s lists %s, which the source did not", name, c.To, c.TP)
		}
	}
	c.checkOthers(t, fromCPs, toCPs)
	for _, dir := range []string{c.From, c.To} {
		NoStrayFolders(t, dir)
		NoLeftovers(t, dir)
		Consistent(t, dir)
	}
}

// wholeFolder reports whether dir has the partition's folder; one that is there must be
// identical to the source before the move.
func (c *MoveCase) wholeFolder(t testing.TB, dir string) bool {
	t.Helper()
	got := Snapshot(t, filepath.Join(dir, c.TP.String()))
	if len(got) == 0 {
		return false
	}
	if d := Diff(c.folder, got); len(d) > 0 {
		t.Errorf("%s is not the source folder: %v", filepath.Join(dir, c.TP.String()), d)
	}
	return true
}

func (c *MoveCase) checkOthers(t testing.TB, fromCPs, toCPs map[string]*logdir.Checkpoint) {
	t.Helper()
	for dir, cps := range map[string]map[string]*logdir.Checkpoint{c.From: fromCPs, c.To: toCPs} {
		for _, name := range logdir.CheckpointFiles {
			if got, want := others(cps[name], c.TP), c.others[dir][name]; !slices.Equal(got, want) {
				t.Errorf("%s: the other entries changed: %v, want %v", filepath.Join(dir, name), got, want)
			}
		}
	}
}

// RecoverCase is the state before a recovery of TP from From into To, and the checks of
// what the recovery may leave.
type RecoverCase struct {
	From, To string
	TP       logdir.TP
	source   map[string]string         // snapshot of all of From
	folder   map[string]string         // snapshot of From/TP
	entries  map[string]*logdir.Entry  // From's entries of TP, per file
	others   map[string][]logdir.Entry // To's other entries, per file
}

// NewRecoverCase records the state before the recovery.
func NewRecoverCase(t testing.TB, from, to, tp string) *RecoverCase {
	t.Helper()
	p, err := logdir.ParseTP(tp)
	if err != nil {
		t.Fatal(err)
	}
	c := &RecoverCase{From: from, To: to, TP: p, source: Snapshot(t, from), folder: Snapshot(t, filepath.Join(from, tp)),
		entries: map[string]*logdir.Entry{}}
	for name, cp := range Checkpoints(t, from) {
		if e, ok := cp.Lookup(p); ok {
			c.entries[name] = &e
		}
	}
	c.others = otherEntries(t, p, to)[to]
	return c
}

// CheckInterrupted checks what a recovery interrupted at any point may leave: From
// unchanged byte for byte, no folder Kafka fails on in To, checkpoint files that parse,
// the partition's folder in To absent or whole, To's other entries as they were.
func (c *RecoverCase) CheckInterrupted(t testing.TB) {
	t.Helper()
	if d := Diff(c.source, Snapshot(t, c.From)); len(d) > 0 {
		t.Errorf("the source dir %s changed: %v", c.From, d)
	}
	NoStrayFolders(t, c.To)
	got := Snapshot(t, filepath.Join(c.To, c.TP.String()))
	if d := Diff(c.folder, got); len(got) > 0 && len(d) > 0 {
		t.Errorf("%s is not whole: %v", filepath.Join(c.To, c.TP.String()), d)
	}
	c.checkOthers(t, Checkpoints(t, c.To))
}

// CheckDone checks a finished recovery: From unchanged, the folder in To identical to
// From's, To's entries of the partition exactly From's, no staging or temporary files,
// nothing Inspect objects to in To.
func (c *RecoverCase) CheckDone(t testing.TB) {
	t.Helper()
	if d := Diff(c.source, Snapshot(t, c.From)); len(d) > 0 {
		t.Errorf("the source dir %s changed: %v", c.From, d)
	}
	if d := Diff(c.folder, Snapshot(t, filepath.Join(c.To, c.TP.String()))); len(d) > 0 {
		t.Errorf("%s is not the source's copy: %v", filepath.Join(c.To, c.TP.String()), d)
	}
	toCPs := Checkpoints(t, c.To)
	for _, name := range logdir.CheckpointFiles {
		g, ok := toCPs[name].Lookup(c.TP)
		if want := c.entries[name]; want != nil && (!ok || g != *want) {
			t.Errorf("%s: %s has %v (present: %v), want %v", name, c.To, g, ok, *want)
		} else if want == nil && ok {
			t.Errorf("%s: %s lists %s, which the source does not", name, c.To, c.TP)
		}
	}
	c.checkOthers(t, toCPs)
	NoStrayFolders(t, c.To)
	NoLeftovers(t, c.To)
	Consistent(t, c.To)
}

func (c *RecoverCase) checkOthers(t testing.TB, cps map[string]*logdir.Checkpoint) {
	t.Helper()
	for _, name := range logdir.CheckpointFiles {
		if got, want := others(cps[name], c.TP), c.others[name]; !slices.Equal(got, want) {
			t.Errorf("%s: the other entries changed: %v, want %v", filepath.Join(c.To, name), got, want)
		}
	}
}
