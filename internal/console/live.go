package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/fleetstatus"
	"github.com/kafkamender/kafkamender/internal/pipeline"
)

// liveProgress is the last progress report of an operation in flight, with the copy rate
// and the time left worked out from the reports before it.
type liveProgress struct {
	events.Progress
	Cluster string    `json:"cluster"`
	At      time.Time `json:"at"`
	// Rate is the copy rate in bytes per second (0: not known yet); ETA the time left at
	// that rate, as text ("" when not known).
	Rate float64 `json:"rate"`
	ETA  string  `json:"eta"`
	// Text is the line the pages show.
	Text string `json:"text"`
	// Percent is how far the copy is (bytes, or partitions when no bytes are expected).
	Percent int `json:"percent"`
}

// hub is the one reader behind every live page of a console: while at least one page is
// open it reads the clusters' state every tick (once, whatever the number of pages) and
// follows the progress subjects of the operations in flight, and pushes what changes to
// every page. No page polls.
type hub struct {
	s *Server

	mu      sync.Mutex
	clients map[chan []byte]struct{}
	stop    context.CancelFunc
	done    chan struct{}
	last    map[string]*liveProgress // by event id
	subs    map[string]*nats.Subscription
	digest  string
}

func newHub(s *Server) *hub {
	return &hub{s: s, clients: map[chan []byte]struct{}{}, last: map[string]*liveProgress{}, subs: map[string]*nats.Subscription{}}
}

// progress is the last progress of event id, nil when none was seen.
func (h *hub) progress(id string) *liveProgress {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p := h.last[id]; p != nil {
		c := *p
		return &c
	}
	return nil
}

// join adds a page; the first starts the reader. It returns the page's channel and what
// the page is sent first (the current progress reports).
func (h *hub) join() (chan []byte, [][]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := make(chan []byte, 64)
	h.clients[ch] = struct{}{}
	if h.stop == nil {
		ctx, stop := context.WithCancel(context.Background())
		h.stop, h.done = stop, make(chan struct{})
		go h.run(ctx, h.done)
	}
	var first [][]byte
	for _, p := range h.last {
		first = append(first, sseMessage("progress", p))
	}
	if h.digest != "" {
		first = append(first, sseMessage("state", h.digest))
	}
	return ch, first
}

// leave removes a page; the last stops the reader.
func (h *hub) leave(ch chan []byte) {
	h.mu.Lock()
	delete(h.clients, ch)
	var stop context.CancelFunc
	var done chan struct{}
	if len(h.clients) == 0 && h.stop != nil {
		stop, done, h.stop = h.stop, h.done, nil
	}
	h.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// broadcast sends msg to every page; a page too slow to take it misses it.
func (h *hub) broadcast(msg []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.clients {
		select {
		case ch <- msg:
		default:
		}
	}
}

func (h *hub) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	defer h.unsubscribeAll()
	t := time.NewTicker(h.s.cfg.Tick)
	defer t.Stop()
	for {
		h.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tick reads the clusters' state: a change of it is pushed (pages reload), and the
// progress subjects followed are those of the operations in flight.
func (h *hub) tick(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := fleetstatus.Read(rctx, h.s.js, h.s.cfg.Consumer, "")
	if err != nil {
		if ctx.Err() == nil {
			h.s.logger.Debug("console: read the clusters' state", zap.Error(err))
		}
		return
	}
	d := stateDigest(st)
	inFlight := map[string]string{} // event: cluster
	for _, c := range st {
		if c.InFlight != nil {
			inFlight[c.InFlight.Event] = c.Cluster
		}
	}
	h.mu.Lock()
	changed := d != h.digest
	h.digest = d
	for id, sub := range h.subs {
		if _, ok := inFlight[id]; !ok {
			_ = sub.Unsubscribe()
			delete(h.subs, id)
			delete(h.last, id)
		}
	}
	for id, cluster := range inFlight {
		if _, ok := h.subs[id]; ok {
			continue
		}
		sub, err := h.s.nc.Subscribe(events.ProgressSubject(id), func(m *nats.Msg) { h.report(cluster, m.Data) })
		if err != nil {
			h.s.logger.Warn("console: follow progress", zap.String("event", id), zap.Error(err))
			continue
		}
		h.subs[id] = sub
	}
	h.mu.Unlock()
	if changed {
		h.broadcast(sseMessage("state", d))
	}
}

// report takes a progress report: the rate is the bytes copied since the previous report
// over the time between them, smoothed.
func (h *hub) report(cluster string, raw []byte) {
	var p events.Progress
	if json.Unmarshal(raw, &p) != nil || events.CheckID(p.ID) != nil {
		return
	}
	now := h.s.cfg.Now()
	lp := &liveProgress{Progress: p, Cluster: cluster, At: now}
	h.mu.Lock()
	if prev := h.last[p.ID]; prev != nil {
		lp.Rate = prev.Rate
		if dt := now.Sub(prev.At).Seconds(); dt > 0 && p.BytesCopied >= prev.BytesCopied {
			r := float64(p.BytesCopied-prev.BytesCopied) / dt
			if lp.Rate > 0 {
				r = 0.5*r + 0.5*lp.Rate
			}
			lp.Rate = r
		}
	}
	lp.finish()
	h.last[p.ID] = lp
	h.mu.Unlock()
	h.broadcast(sseMessage("progress", lp))
}

// finish works out the percentage, the time left and the text.
func (p *liveProgress) finish() {
	switch {
	case p.BytesExpected > 0:
		p.Percent = int(min(100, p.BytesCopied*100/p.BytesExpected))
	case p.PartitionsTotal > 0:
		p.Percent = p.PartitionsDone * 100 / p.PartitionsTotal
	}
	if left := p.BytesExpected - p.BytesCopied; p.Rate > 0 && left > 0 {
		p.ETA = time.Duration(float64(left) / p.Rate * float64(time.Second)).Round(time.Second).String()
	}
	p.Text = fmt.Sprintf("batch %d of %d: %d of %d partitions, %s of %s copied", p.Batch, p.Batches,
		p.PartitionsDone, p.PartitionsTotal, events.BytesText(p.BytesCopied), events.BytesText(p.BytesExpected))
	if p.Rate > 0 {
		p.Text += fmt.Sprintf(", %s/s", events.BytesText(int64(p.Rate)))
	}
	if p.ETA != "" {
		p.Text += ", about " + p.ETA + " left"
	}
	if p.Paused != "" {
		p.Text += "; waiting: " + p.Paused
	}
}

func (h *hub) unsubscribeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, sub := range h.subs {
		_ = sub.Unsubscribe()
		delete(h.subs, id)
	}
}

// stateDigest sums up what the clusters page shows of each cluster, apart from progress:
// when it changes, the page reloads.
func stateDigest(st []fleetstatus.Cluster) string {
	type key struct {
		Cluster  string
		Paused   bool
		Event    string
		Step     string
		Attempt  int
		Plans    []string
		Waiting  uint64
		Out      int
		Holder   string
		Location string
	}
	keys := make([]key, 0, len(st))
	for _, c := range st {
		k := key{Cluster: c.Cluster, Paused: c.Paused != nil, Plans: c.PlansAwaiting, Waiting: c.Waiting, Out: c.Out, Location: c.Lock.Location}
		if c.InFlight != nil {
			k.Event, k.Step, k.Attempt = c.InFlight.Event, string(c.InFlight.Step), c.InFlight.Attempt
		}
		if c.Lock.Holder != nil {
			k.Holder = c.Lock.Holder.Worker + "/" + c.Lock.Holder.Event
		}
		keys = append(keys, k)
	}
	raw, _ := json.Marshal(keys)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// sseMessage is one server-sent event.
func sseMessage(name string, data any) []byte {
	raw, _ := json.Marshal(data)
	return fmt.Appendf(nil, "event: %s\ndata: %s\n\n", name, raw)
}

// sseStart prepares w for server-sent events; false when the connection cannot stream.
func sseStart(w http.ResponseWriter) (http.Flusher, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return nil, false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no") // proxies: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return f, true
}

// heartbeat keeps a quiet stream open through proxies, and finds pages gone.
const heartbeat = 15 * time.Second

// beat writes a heartbeat (a comment line); false when the page is gone.
func beat(w http.ResponseWriter, f http.Flusher) bool {
	if _, err := w.Write([]byte(": heartbeat\n\n")); err != nil {
		return false
	}
	f.Flush()
	return true
}

// serveLive streams the clusters' state changes and the progress of the operations in
// flight (GET /ui/live).
func (s *Server) serveLive(w http.ResponseWriter, r *http.Request, _ identity) {
	f, ok := sseStart(w)
	if !ok {
		return
	}
	ch, first := s.hub.join()
	defer s.hub.leave(ch)
	for _, m := range first {
		_, _ = w.Write(m)
	}
	f.Flush()
	hb := time.NewTicker(heartbeat)
	defer hb.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.closed:
			return
		case m := <-ch:
			if _, err := w.Write(m); err != nil {
				return
			}
			f.Flush()
		case <-hb.C:
			if !beat(w, f) {
				return
			}
		}
	}
}

// serveResultWait tells an event's page when the event's result comes (GET
// /ui/live/result/{id}): one "result" message, then the stream ends.
func (s *Server) serveResultWait(w http.ResponseWriter, r *http.Request, _ identity) {
	id := r.PathValue("id")
	if events.CheckID(id) != nil {
		http.Error(w, "not an event id", http.StatusNotFound)
		return
	}
	got := make(chan struct{}, 1)
	heard := func() {
		select {
		case got <- struct{}{}:
		default:
		}
	}
	sub, err := s.nc.Subscribe(events.ResultSubject(id), func(*nats.Msg) { heard() })
	if err != nil {
		http.Error(w, "could not follow the result: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	f, ok := sseStart(w)
	if !ok {
		return
	}
	// Stored already (before the subscription)?
	// Stored already (before the subscription), or stored before the subscription's
	// interest reached the node the worker publishes on (a NATS cluster): looked up now,
	// and now and then.
	lookup := func() {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		if stream, err := s.js.Stream(ctx, events.ResultsStream); err == nil {
			if res, _, err := pipeline.ReadResult(ctx, stream, id); err == nil && res != nil {
				heard()
			}
		} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
			s.logger.Debug("console: look up a result", zap.Error(err))
		}
	}
	lookup()
	again := time.NewTicker(5 * time.Second)
	defer again.Stop()
	hb := time.NewTicker(heartbeat)
	defer hb.Stop()
	for {
		select {
		case <-again.C:
			lookup()
		case <-r.Context().Done():
			return
		case <-s.closed:
			return
		case <-got:
			_, _ = w.Write(sseMessage("result", id))
			f.Flush()
			return
		case <-hb.C:
			if !beat(w, f) {
				return
			}
		}
	}
}
