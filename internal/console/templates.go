package console

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/events"
)

// pageNames are the pages, each templates/<name>.html over layout.html and parts.html.
var pageNames = []string{"login", "message", "clusters", "plans", "plan", "audit", "event", "dead"}

func parseTemplates() (map[string]*template.Template, error) {
	base, err := template.New("base").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html")
	if err != nil {
		return nil, fmt.Errorf("console templates: %w", err)
	}
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

var funcs = template.FuncMap{
	"fmtTime": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"ago":   func(t time.Time) string { return shortDuration(time.Since(t)) },
	"until": func(t time.Time) string { return shortDuration(time.Until(t)) },
	"since": func(a, b time.Time) string { return shortDuration(b.Sub(a)) },
	"bytes": events.BytesText,
	"ids": func(l []int32) string {
		s := make([]string, len(l))
		for i, id := range l {
			s[i] = strconv.Itoa(int(id))
		}
		return "[" + strings.Join(s, ",") + "]"
	},
	"leader": func(l int32) string {
		if l < 0 {
			return "none"
		}
		return strconv.Itoa(int(l))
	},
	"deref": func(p *int32) int32 {
		if p == nil {
			return -1
		}
		return *p
	},
	"sizeText":    sizeText,
	"changeCount": changeCount,
	"statuses":    func() []events.Status { return statuses },
	"hasPrefix":   strings.HasPrefix,
}

// shortDuration is a duration to the second (to the millisecond under a second).
func shortDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// sizeText sums a plan up.
func sizeText(s approval.Size) string {
	parts := []string{fmt.Sprintf("%d partitions", s.Partitions), events.BytesText(s.Bytes) + " to copy"}
	if s.LeadersMoved > 0 {
		parts = append(parts, fmt.Sprintf("%d leaders moved", s.LeadersMoved))
	}
	if s.ReplicationFactorLowered > 0 {
		parts = append(parts, fmt.Sprintf("replication factor lowered on %d", s.ReplicationFactorLowered))
	}
	if s.Unclean > 0 {
		parts = append(parts, fmt.Sprintf("%d unclean elections", s.Unclean))
	}
	return strings.Join(parts, ", ")
}
