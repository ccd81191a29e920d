package engine

import (
	"fmt"
)

// Policy holds every threshold of pem; a tree overrides any of them in pem.yaml.
// DefaultPolicy is the one place their default values are written.
type Policy struct {
	TTLDays      int     `yaml:"ttl_days" json:"ttl_days"`
	HalfLifeDays float64 `yaml:"half_life_days" json:"half_life_days"`

	// Repository health (docs/scale.md): consolidation and deep-learn repack
	// the git object store once it holds more packs, or more loose objects,
	// than these (0 disables one).
	RepackPacks int `yaml:"repack_packs" json:"repack_packs"`
	RepackLoose int `yaml:"repack_loose" json:"repack_loose"`
	// Deep-learn keeps this many of its dated review branches
	// (pem/deep-learn/<date>, the newest); older ones that hold only its own
	// commit are deleted (0 keeps them all).
	ReviewBranchesKept int `yaml:"review_branches_kept" json:"review_branches_kept"`

	// Tier bounds on confidence.
	P1 float64 `yaml:"p1" json:"p1"` // replay directly
	P2 float64 `yaml:"p2" json:"p2"` // verify, then replay
	P3 float64 `yaml:"p3" json:"p3"` // hints

	// Promotion.
	CandidateConfidence float64 `yaml:"candidate_confidence" json:"candidate_confidence"`
	CandidateSuccesses  int     `yaml:"candidate_successes" json:"candidate_successes"`
	VerifiedConfidence  float64 `yaml:"verified_confidence" json:"verified_confidence"`
	VerifiedSuccesses   int     `yaml:"verified_successes" json:"verified_successes"`
	VerifiedLastN       int     `yaml:"verified_last_n" json:"verified_last_n"`
	VerifiedSessions    int     `yaml:"verified_sessions" json:"verified_sessions"`
	ContestBelow        float64 `yaml:"contest_below" json:"contest_below"`
	ContestLastN        int     `yaml:"contest_last_n" json:"contest_last_n"` // a verified entry whose last N outcomes failed is contested
	AnswerSessions      int     `yaml:"answer_sessions" json:"answer_sessions"`

	// The trust ladder (docs/data-model.md, "Confidence").
	FirstSuccessConfidence float64 `yaml:"first_success_confidence" json:"first_success_confidence"` // confidence after one success
	P2Sessions             int     `yaml:"p2_sessions" json:"p2_sessions"`                           // P2 needs successes from this many sessions
	VerifiedNeedsVerdict   bool    `yaml:"verified_needs_verdict" json:"verified_needs_verdict"`     // verified needs a success confirmed by a verdict

	// Failure weights by kind: the route's own fault, the environment's.
	RouteFailureWeight       float64 `yaml:"route_failure_weight" json:"route_failure_weight"`
	EnvironmentFailureWeight float64 `yaml:"environment_failure_weight" json:"environment_failure_weight"`
	JudgedWrongWeight        float64 `yaml:"judged_wrong_weight" json:"judged_wrong_weight"` // a run a verdict judged wrong

	MemoryMaxChars int `yaml:"memory_max_chars" json:"memory_max_chars"`

	// Site-wide memory (site.go): a blocker or a failing selector becomes a
	// note of the whole site once seen under this many intents; a recovery
	// on a URL pattern once seen in this many runs.
	SiteMinIntents   int `yaml:"site_min_intents" json:"site_min_intents"`
	SiteRecoveryRuns int `yaml:"site_recovery_runs" json:"site_recovery_runs"`
	// RelatedRoutes caps the routes of other intents of the site a recall carries.
	RelatedRoutes int `yaml:"related_routes" json:"related_routes"`
	// CompactBelowWeight: consolidation compacts an entry's evidence whose
	// decayed weight fell below it (and whose traces expired) into the
	// entry's digest (engine.Digest, docs/data-model.md); 0 keeps every item.
	CompactBelowWeight float64 `yaml:"compact_below_weight" json:"compact_below_weight"`
}

// DefaultPolicy returns the thresholds of DESIGN §4.
func DefaultPolicy() Policy {
	return Policy{
		TTLDays:                  30,
		HalfLifeDays:             30,
		RepackPacks:              20,
		RepackLoose:              2000,
		ReviewBranchesKept:       7,
		P1:                       0.85,
		P2:                       0.60,
		P3:                       0.40,
		CandidateConfidence:      0.60,
		CandidateSuccesses:       2,
		VerifiedConfidence:       0.85,
		VerifiedSuccesses:        5,
		VerifiedLastN:            3,
		VerifiedSessions:         2,
		ContestBelow:             0.60,
		ContestLastN:             3,
		AnswerSessions:           2,
		FirstSuccessConfidence:   0.50,
		P2Sessions:               2,
		VerifiedNeedsVerdict:     false,
		RouteFailureWeight:       1.0,
		EnvironmentFailureWeight: 0.25,
		JudgedWrongWeight:        3,
		MemoryMaxChars:           2000,
		SiteMinIntents:           2,
		SiteRecoveryRuns:         2,
		RelatedRoutes:            3,
		CompactBelowWeight:       0.5, // half_life_days: with the default 30-day ttl, compaction the day after a run's trace expired (docs/scale.md, "Compaction after the TTL")
	}
}

// Validate reports the first setting that makes no sense, naming it.
func (p Policy) Validate() error {
	bad := func(name string, v any) error {
		return fmt.Errorf("pem.yaml: %s = %v is out of range: fix or remove it to use the default", name, v)
	}
	switch {
	case p.TTLDays < 1:
		return bad("ttl_days", p.TTLDays)
	case p.HalfLifeDays <= 0:
		return bad("half_life_days", p.HalfLifeDays)
	case p.RepackPacks < 0:
		return bad("repack_packs", p.RepackPacks)
	case p.RepackLoose < 0:
		return bad("repack_loose", p.RepackLoose)
	case p.ReviewBranchesKept < 0:
		return bad("review_branches_kept", p.ReviewBranchesKept)
	case !(p.P3 > 0 && p.P3 < p.P2 && p.P2 < p.P1 && p.P1 <= 1):
		return fmt.Errorf("pem.yaml: tier bounds must satisfy 0 < p3 < p2 < p1 <= 1 (have p3=%v p2=%v p1=%v)", p.P3, p.P2, p.P1)
	case p.CandidateConfidence <= 0 || p.CandidateConfidence > 1:
		return bad("candidate_confidence", p.CandidateConfidence)
	case p.VerifiedConfidence < p.CandidateConfidence || p.VerifiedConfidence > 1:
		return bad("verified_confidence", p.VerifiedConfidence)
	case p.CandidateSuccesses < 1:
		return bad("candidate_successes", p.CandidateSuccesses)
	case p.VerifiedSuccesses < p.CandidateSuccesses:
		return bad("verified_successes", p.VerifiedSuccesses)
	case p.VerifiedLastN < 0:
		return bad("verified_last_n", p.VerifiedLastN)
	case p.VerifiedSessions < 1:
		return bad("verified_sessions", p.VerifiedSessions)
	case p.ContestBelow <= 0 || p.ContestBelow > p.VerifiedConfidence:
		return bad("contest_below", p.ContestBelow)
	case p.ContestLastN < 0:
		return bad("contest_last_n", p.ContestLastN)
	case p.AnswerSessions < 1:
		return bad("answer_sessions", p.AnswerSessions)
	case p.FirstSuccessConfidence <= 0 || p.FirstSuccessConfidence >= 1:
		return bad("first_success_confidence", p.FirstSuccessConfidence)
	case p.P2Sessions < 1:
		return bad("p2_sessions", p.P2Sessions)
	case p.RouteFailureWeight < 0 || p.EnvironmentFailureWeight < 0 || p.JudgedWrongWeight < 0:
		return bad("failure weights", fmt.Sprint(p.RouteFailureWeight, p.EnvironmentFailureWeight, p.JudgedWrongWeight))
	case p.MemoryMaxChars < 200:
		return bad("memory_max_chars", p.MemoryMaxChars)
	case p.SiteMinIntents < 1:
		return bad("site_min_intents", p.SiteMinIntents)
	case p.SiteRecoveryRuns < 1:
		return bad("site_recovery_runs", p.SiteRecoveryRuns)
	case p.RelatedRoutes < 0 || p.RelatedRoutes > 10:
		return bad("related_routes", p.RelatedRoutes)
	case p.CompactBelowWeight < 0 || p.CompactBelowWeight >= 1:
		return bad("compact_below_weight", p.CompactBelowWeight)
	case p.CompactBelowWeight > 0 && (p.VerifiedSessions > MaxDigestSessions || p.P2Sessions > MaxDigestSessions || p.AnswerSessions > MaxDigestSessions ||
		p.VerifiedLastN > MaxDigestRecent || p.ContestLastN > MaxDigestRecent):
		return fmt.Errorf("pem.yaml: with compact_below_weight on, session counts and last-N settings must be at most %d (what compacted evidence keeps): lower them, or set compact_below_weight: 0", MaxDigestSessions)
	}
	return nil
}

// FailureWeight is how much one failure of category c counts against the route.
// Gates count 0: they become blockers instead; runs the site is not to blame
// for (aborted, planner_error) count 0; a run judged wrong counts
// JudgedWrongWeight.
func (p Policy) FailureWeight(c FailureCategory) float64 {
	switch {
	case c.IsGate(), c.IsNoFault():
		return 0
	case c == JudgedWrong:
		return p.JudgedWrongWeight
	case c == Network:
		return p.EnvironmentFailureWeight
	default:
		return p.RouteFailureWeight
	}
}

// Config is pem.yaml: the tree's format and its policy overrides. Fields left
// out keep DefaultPolicy's values.
type Config struct {
	Format    int       `yaml:"format"`
	Policy    Policy    `yaml:"policy"`
	Schedules Schedules `yaml:"schedules,omitempty"`
	// Approval lists the steps that need a person's yes (engine/approval.go);
	// empty asks for nothing.
	Approval ApprovalPolicy `yaml:"approval,omitempty"`
}

// Schedules are the cron specs pem serve uses when no flag overrides them.
type Schedules struct {
	Consolidate string `yaml:"consolidate,omitempty"`
	DeepLearn   string `yaml:"deep_learn,omitempty"`
}

// DefaultConfig is the pem.yaml that pem init writes.
func DefaultConfig() Config {
	return Config{Format: Format, Policy: DefaultPolicy(), Schedules: Schedules{Consolidate: "@hourly", DeepLearn: "0 3 * * *"}}
}
