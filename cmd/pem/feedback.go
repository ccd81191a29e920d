package main

import (
	"github.com/urfave/cli/v2"

	"github.com/pemdev/pem/engine"
)

func newFeedbackCmd() *cli.Command {
	return &cli.Command{
		Name:      "feedback",
		Usage:     "record a judgement of a run (right or wrong) as an immutable verdict; print the result as JSON",
		ArgsUsage: "TRACE_ID",
		Description: "TRACE_ID is the id pem experience save printed (\"id\"). The verdict is written to\n" +
			"verdicts/<domain>/<trace-id>/<judge>.yaml beside the traces (the trace is never edited) and shared\n" +
			"like traces; pem consolidate folds it: wrong makes the run a judged_wrong failure (weight\n" +
			"judged_wrong_weight of pem.yaml), contests a verified entry and caps it at P3 until a newer run is\n" +
			"judged right or the route changes; right marks the success confirmed. The same verdict twice is\n" +
			"recorded once; a judge who contradicts an earlier verdict on the same run is refused (exit 8).\n" +
			"An unknown trace id exits 4; a verdict on a lesson (a save with no steps) exits 2.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "verdict", Usage: "`right` or wrong (required)"},
			&cli.StringFlag{Name: "note", Usage: "why, in a few words (`TEXT`)"},
			&cli.StringFlag{Name: "judge", Usage: "who judges (`NAME`; default: this host)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("experience feedback needs exactly one TRACE_ID, got %d arguments", c.NArg())
			}
			if c.String("verdict") == "" {
				return usagef("experience feedback needs --verdict right or --verdict wrong")
			}
			e, s, err := openEngine(c)
			if err != nil {
				return err
			}
			defer s.Close()
			res, err := e.Feedback(c.Context, engine.FeedbackRequest{Trace: c.Args().First(), Verdict: c.String("verdict"),
				Note: c.String("note"), Judge: c.String("judge")})
			if err != nil {
				return err
			}
			return writeJSON(c.App.Writer, res)
		},
	}
}
