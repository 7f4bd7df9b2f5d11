package logdir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
)

// Report is what Inspect finds in a log dir.
type Report struct {
	Dir           string
	Meta          *Meta  // nil when meta.properties is absent or unreadable
	MetaErr       string // why Meta is nil
	Lock          LockState
	LockErr       string
	CleanShutdown bool // Kafka's clean-shutdown marker is present
	Checkpoints   []CheckpointInfo
	Folders       []Folder
	TmpFiles      []string // leftover "*.tmp" files at the root
	Staging       string   // <dir>.kafkamender
	StagingLeft   []string // what is in it (it should not exist)
	Problems      []string // the inconsistencies, each a sentence
}

// CheckpointInfo is one of the four checkpoint files.
type CheckpointInfo struct {
	Name    string
	Present bool
	Entries []Entry
	Err     string // why it could not be read, or the parse error when it is malformed
	Unread  bool   // Err is why the file could not be read (not a parse error)
}

// Folder is a subdirectory of the log dir.
type Folder struct {
	Name  string
	Kind  FolderKind
	TP    TP // the partition (for delete, future and stray folders when the name shows it)
	Files int
	Bytes int64
	Err   string
}

// Inspect reads the log dir dir and reports its checkpoint files, partition folders,
// lock and meta.properties, and every inconsistency among them. It changes nothing. An
// error means dir could not be read at all; anything wrong inside it is in Problems.
//
// It probes dir/.lock with fcntl: do not call it on a dir whose lock this process holds
// (see ProbeLock).
//
// It follows no symbolic link in the dir (or in its staging directory): each one is a
// problem, and what it points to is not read.
func Inspect(dir string) (*Report, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	parent, d, err := openLogDir(dir)
	if err != nil {
		return nil, err
	}
	defer closeAll(d, parent)
	r := &Report{Dir: dir, Staging: StagingDir(d.path)}
	r.readMeta(d)
	r.readLock(d)
	if r.CleanShutdown, err = d.exists(CleanShutdownFile); err != nil {
		return nil, err
	}
	if err := r.readRoot(d); err != nil {
		return nil, err
	}
	r.readCheckpoints(d)
	r.crossCheck()
	if err := r.readStaging(parent, filepath.Base(d.path)+StagingSuffix); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Report) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

func (r *Report) readMeta(d *dir) {
	data, err := d.readFile(MetaFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.MetaErr = "absent"
		r.problem("%s is absent: this is not a Kafka log dir, or its broker never started on it", MetaFile)
	case err != nil:
		r.MetaErr = err.Error()
		r.problem("%v", err)
	default:
		m := ParseMeta(data)
		r.Meta = m
		if id, _ := m.BrokerID(); id == "" {
			r.problem("%s has neither node.id nor broker.id", MetaFile)
		}
		r.Problems = append(r.Problems, m.Problems()...)
	}
}

func (r *Report) readLock(d *dir) {
	st, err := probeLock(d)
	r.Lock = st
	if err != nil {
		r.LockErr = err.Error()
		r.problem("%v", err)
	}
}

// readRoot lists the subdirectories and the leftover temporary files of the root.
func (r *Report) readRoot(d *dir) error {
	entries, err := d.list()
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if e.Type()&fs.ModeSymlink != 0 {
			r.problem("%v", &SymlinkError{Path: d.join(name)})
			continue
		}
		if !e.IsDir() {
			if strings.HasSuffix(name, tmpSuffix) {
				r.TmpFiles = append(r.TmpFiles, name)
				r.problem("%s: left by an interrupted write; the complete file is %s", name, strings.TrimSuffix(name, tmpSuffix))
			}
			continue
		}
		f := Folder{Name: name}
		f.Kind, f.TP = ClassifyFolder(name)
		files, size, err := countFolder(d, name)
		f.Files, f.Bytes = files, size
		if err != nil {
			f.Err = err.Error()
			r.problem("%s/: %v", name, err)
		}
		if f.Kind == KindUnknown {
			r.problem("%s/: not a partition folder: Kafka fails to load this log dir at startup; move it out of the log dir", name)
		}
		r.Folders = append(r.Folders, f)
	}
	return nil
}

func (r *Report) readCheckpoints(d *dir) {
	for _, name := range CheckpointFiles {
		info := CheckpointInfo{Name: name}
		data, err := d.readFile(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			info.Present, info.Err, info.Unread = true, err.Error(), true
			r.problem("%v", err)
		default:
			info.Present = true
			cp, err := ParseCheckpoint(name, data)
			if err != nil {
				info.Err = err.Error()
				r.problem("%v", err)
				break
			}
			info.Entries = cp.Entries
			r.Problems = append(r.Problems, cp.Problems(name)...)
		}
		r.Checkpoints = append(r.Checkpoints, info)
	}
}

// crossCheck compares the partition folders with the checkpoint entries: every folder
// needs a recovery point and a high watermark, and every entry needs a folder (a live
// one, or the future folder of an online move).
func (r *Report) crossCheck() {
	live, hosted := map[TP]bool{}, map[TP]bool{}
	for _, f := range r.Folders {
		switch f.Kind {
		case KindPartition:
			live[f.TP], hosted[f.TP] = true, true
		case KindFuture:
			hosted[f.TP] = true
		}
	}
	for _, cp := range r.Checkpoints {
		if cp.Err != "" {
			continue
		}
		listed := map[TP]bool{}
		for i, e := range cp.Entries {
			listed[e.TP] = true
			if !hosted[e.TP] {
				r.problem("%s:%d: %s has no partition folder", cp.Name, i+firstEntryLine, e.TP)
			}
		}
		if cp.Name != RecoveryPointCheckpoint && cp.Name != ReplicationOffsetCheckpoint {
			continue // Kafka lists only some partitions in the other two
		}
		for _, f := range r.Folders {
			if f.Kind == KindPartition && !listed[f.TP] {
				r.problem("%s/: no entry in %s%s", f.Name, cp.Name, absent(cp))
			}
		}
	}
}

func absent(cp CheckpointInfo) string {
	if !cp.Present {
		return " (the file is absent)"
	}
	return ""
}

// readStaging lists what interrupted runs of this tool left in <dir>.kafkamender.
func (r *Report) readStaging(parent *dir, name string) error {
	st, err := parent.sub(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var link *SymlinkError
	if errors.As(err, &link) {
		r.problem("%v", err)
		return nil
	}
	if err != nil {
		return err
	}
	defer st.close()
	entries, err := st.list()
	if err != nil {
		return err
	}
	for _, e := range entries {
		r.StagingLeft = append(r.StagingLeft, e.Name())
		what := "a partial or unplaced copy"
		if strings.HasPrefix(e.Name(), trashPrefix) {
			what = "the old copy of a moved partition"
		}
		r.problem("%s: %s, left by an interrupted kafkamender logdir run; rerun the same command to finish it",
			filepath.Join(r.Staging, e.Name()), what)
	}
	if len(entries) == 0 {
		r.problem("%s: an empty staging directory, left by an interrupted kafkamender logdir run", r.Staging)
	}
	return nil
}

// AcrossDirs lists the inconsistencies between log dirs of one broker (the reports with
// the same broker id and cluster.id): a partition folder in two of them, which makes Kafka
// refuse to start ("Duplicate log directories"). An interrupted move leaves that for a
// moment; rerunning it resolves it.
func AcrossDirs(reports ...*Report) []string {
	type broker struct{ id, cluster string }
	dirs := map[broker]map[TP][]string{}
	var order []broker
	for _, r := range reports {
		if r == nil || r.Meta == nil || len(r.Meta.Problems()) > 0 {
			continue // its ids are not shown
		}
		id, _ := r.Meta.BrokerID()
		b := broker{id, r.Meta.ClusterID()}
		if dirs[b] == nil {
			dirs[b] = map[TP][]string{}
			order = append(order, b)
		}
		for _, f := range r.Folders {
			if f.Kind == KindPartition || f.Kind == KindMetadata {
				dirs[b][f.TP] = append(dirs[b][f.TP], r.Dir)
			}
		}
	}
	var out []string
	for _, b := range order {
		for _, tp := range slices.SortedFunc(maps.Keys(dirs[b]), compareTP) {
			if in := dirs[b][tp]; len(in) > 1 {
				out = append(out, fmt.Sprintf("%s is in %d log dirs of broker %s (%s): Kafka refuses to start "+
					"(\"Duplicate log directories\"); if a move was interrupted, run it again", tp, len(in), b.id, strings.Join(in, ", ")))
			}
		}
	}
	return out
}

func compareTP(a, b TP) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// WriteText prints the report for people.
func (r *Report) WriteText(w io.Writer) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "log dir %s\n", r.Dir)
	if r.Meta != nil {
		fmt.Fprintf(b, "  %s: %s\n", MetaFile, r.Meta)
	} else {
		fmt.Fprintf(b, "  %s: %s\n", MetaFile, r.MetaErr)
	}
	if r.LockErr != "" {
		fmt.Fprintf(b, "  %s: %s\n", LockFile, r.LockErr)
	} else {
		fmt.Fprintf(b, "  %s: %s\n", LockFile, r.Lock)
	}
	fmt.Fprintf(b, "  %s: %s\n", CleanShutdownFile, presence(r.CleanShutdown, "present (the broker stopped cleanly)", "absent"))
	b.WriteString("checkpoint files:\n")
	for _, cp := range r.Checkpoints {
		writeCheckpointInfo(b, cp)
	}
	r.writeFolders(b)
	if len(r.TmpFiles) > 0 {
		b.WriteString("leftover temporary files:\n")
		for _, name := range r.TmpFiles {
			fmt.Fprintf(b, "  %s\n", name)
		}
	}
	if r.StagingLeft != nil {
		fmt.Fprintf(b, "staging directory %s:\n", r.Staging)
		for _, name := range r.StagingLeft {
			fmt.Fprintf(b, "  %s\n", name)
		}
	}
	if len(r.Problems) == 0 {
		b.WriteString("inconsistencies: none\n")
	} else {
		fmt.Fprintf(b, "inconsistencies: %d\n", len(r.Problems))
		for _, p := range r.Problems {
			fmt.Fprintf(b, "  - %s\n", p)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func presence(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

func writeCheckpointInfo(b *strings.Builder, cp CheckpointInfo) {
	switch {
	case !cp.Present:
		fmt.Fprintf(b, "  %s: absent\n", cp.Name)
	case cp.Unread:
		fmt.Fprintf(b, "  %s: UNREADABLE: %s\n", cp.Name, cp.Err)
	case cp.Err != "":
		fmt.Fprintf(b, "  %s: MALFORMED: %s\n", cp.Name, cp.Err)
	default:
		fmt.Fprintf(b, "  %s: %d %s\n", cp.Name, len(cp.Entries), plural(len(cp.Entries), "entry", "entries"))
		for _, e := range cp.Entries {
			fmt.Fprintf(b, "    %s %d\n", e.TP, e.Offset)
		}
	}
}

func (r *Report) writeFolders(b *strings.Builder) {
	if len(r.Folders) == 0 {
		b.WriteString("folders: none\n")
		return
	}
	b.WriteString("folders:\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for _, f := range r.Folders {
		fmt.Fprintf(tw, "  %s/\t%s\t%d %s\t%d bytes\n", f.Name, f.Kind, f.Files, plural(f.Files, "file", "files"), f.Bytes)
	}
	_ = tw.Flush()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
