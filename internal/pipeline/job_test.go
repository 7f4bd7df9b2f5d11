package pipeline_test

import (
	"testing"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/pipeline"
)

func TestNewTestJob(t *testing.T) {
	t.Parallel()
	ev, err := events.Decode(events.Subject(cluster, evType), nil, body("ev-test"), events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job := pipeline.NewTestJob(ev, nil)
	if job.Attempt() != 1 || job.LastAttempt() || job.Event() != ev {
		t.Errorf("job = %+v", job)
	}
	again, err := job.Raw().Decode(events.DecodeOptions{})
	if err != nil || again.ID != "ev-test" || again.Type != evType || again.Cluster != cluster {
		t.Errorf("raw event decodes to %+v, %v", again, err)
	}
	job.Progress(events.Progress{PartitionsDone: 1}) // does nothing, does not panic
	if _, ok, err := job.Earlier(t.Context()); ok || err != nil {
		t.Errorf("Earlier without results = %v, %v", ok, err)
	}
	if _, _, err := job.Publish(t.Context(), &events.Result{Status: events.StatusSucceeded}); err == nil {
		t.Error("Publish without results succeeded")
	}
}
