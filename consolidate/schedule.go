package consolidate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/pemdev/pem/store"
)

// Job is one scheduled task of pem serve.
type Job struct {
	Name string                          // "consolidate", "deep-learn"
	Spec string                          // cron spec: "@hourly", "0 3 * * *", "@every 10m"
	Run  func(ctx context.Context) error // does the work; takes the tree lock itself if it writes
}

// ParseSpec checks a cron spec the way Serve reads it: five fields or a
// descriptor (@hourly, @daily, @every 10m).
func ParseSpec(spec string) error {
	if _, err := cron.ParseStandard(spec); err != nil {
		return fmt.Errorf("cron spec %q: %v: use five fields (\"0 3 * * *\") or a descriptor (\"@hourly\", \"@every 10m\")", spec, err)
	}
	return nil
}

// Serve runs jobs on their schedules until ctx ends, then waits for the
// running job to finish and returns nil. Jobs never overlap: one runs at a
// time in this process (and each takes the tree lock, so not with another
// process either); a job whose time comes while it still runs is skipped.
// A job's context is not cancelled by ctx: a stop lets it finish.
func Serve(ctx context.Context, jobs []Job, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(jobs) == 0 {
		return errors.New("serve: no job to schedule: give --consolidate or --deep-learn a cron spec")
	}
	c := cron.New(cron.WithChain(cron.SkipIfStillRunning(cronLogger{log})), cron.WithLogger(cronLogger{log}))
	var one sync.Mutex // one job at a time
	jobCtx := context.WithoutCancel(ctx)
	for _, j := range jobs {
		j := j
		if err := ParseSpec(j.Spec); err != nil {
			return fmt.Errorf("serve %s: %w", j.Name, err)
		}
		_, err := c.AddFunc(j.Spec, func() {
			one.Lock()
			defer one.Unlock()
			if ctx.Err() != nil {
				return // stopping: start nothing new
			}
			start := time.Now()
			log.Info("job started", "job", j.Name)
			if err := j.Run(jobCtx); err != nil {
				log.Error("job failed", "job", j.Name, "error", err, "duration", time.Since(start).Round(time.Millisecond))
				return
			}
			log.Info("job finished", "job", j.Name, "duration", time.Since(start).Round(time.Millisecond))
		})
		if err != nil {
			return fmt.Errorf("serve %s: %w", j.Name, err)
		}
		log.Info("scheduled", "job", j.Name, "spec", j.Spec)
	}
	c.Start()
	<-ctx.Done()
	log.Info("stopping: waiting for the running job")
	<-c.Stop().Done()
	log.Info("stopped")
	return nil
}

// cronLogger adapts slog to cron's logger.
type cronLogger struct{ l *slog.Logger }

func (c cronLogger) Info(msg string, kv ...any) { c.l.Debug("cron: "+msg, kv...) }
func (c cronLogger) Error(err error, msg string, kv ...any) {
	c.l.Error("cron: "+msg, append(kv, "error", err)...)
}

// ConsolidateJob is pem serve's consolidation: Run over st on spec, logging
// what each run did.
func ConsolidateJob(spec string, st *store.Store, opts Options) Job {
	return Job{Name: "consolidate", Spec: spec, Run: func(ctx context.Context) error {
		res, err := Run(ctx, st, opts)
		if err != nil {
			return err
		}
		opts.log().Info("consolidation", "summary", res.Plan.Summary(), "commits", len(res.Commits), "recovered", res.Recovered)
		return nil
	}}
}
