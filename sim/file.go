package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Duration is a time.Duration written in JSON as a string such as "20ms"
// or "1m30s".
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string ("20ms", "1m"; "0" for zero).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"20ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// ScenarioFile is the scenario file format: JSON whose fields mirror
// Scenario, with snake_case names and durations as strings. Omitted fields
// take Scenario's defaults. Example:
//
//	{"name": "half", "arrivals": {"load": 1.5},
//	 "service": {"kind": "lognormal", "mean": "20ms", "sigma": 0.5},
//	 "steps": [{"at": "30s", "workers": 8}]}
type ScenarioFile struct {
	Name        string      `json:"name"`
	About       string      `json:"about,omitempty"`
	Seed        uint64      `json:"seed,omitempty"`
	Duration    Duration    `json:"duration,omitempty"`
	Warmup      Duration    `json:"warmup,omitempty"`
	Settle      Duration    `json:"settle,omitempty"`
	Workers     int         `json:"workers,omitempty"`
	Service     DistFile    `json:"service,omitzero"`
	NetDelay    Duration    `json:"net_delay,omitempty"`
	Deadline    Duration    `json:"deadline,omitempty"`
	Arrivals    ArrivalFile `json:"arrivals,omitzero"`
	Costs       []CostClass `json:"costs,omitempty"`
	Classes     []Class     `json:"classes,omitempty"`
	Retry       RetryFile   `json:"retry,omitzero"`
	Queue       QueueFile   `json:"queue,omitzero"`
	SkipExpired bool        `json:"skip_expired,omitempty"`
	Steps       []StepFile  `json:"steps,omitempty"`
	Tick        Duration    `json:"tick,omitempty"`
	Band        float64     `json:"band,omitempty"`
	ConvWindow  Duration    `json:"conv_window,omitempty"`
}

// DistFile is Dist in the scenario file format.
type DistFile struct {
	Kind         DistKind `json:"kind,omitempty"`
	Mean         Duration `json:"mean,omitempty"`
	Sigma        float64  `json:"sigma,omitempty"`
	SlowFraction float64  `json:"slow_fraction,omitempty"`
	SlowFactor   float64  `json:"slow_factor,omitempty"`
}

// ArrivalFile is Arrivals in the scenario file format.
type ArrivalFile struct {
	Kind        ArrivalKind `json:"kind,omitempty"`
	Load        float64     `json:"load,omitempty"`
	Rate        float64     `json:"rate,omitempty"`
	BurstFactor float64     `json:"burst_factor,omitempty"`
	BurstOn     Duration    `json:"burst_on,omitempty"`
	BurstOff    Duration    `json:"burst_off,omitempty"`
}

// StepFile is Step in the scenario file format.
type StepFile struct {
	At          Duration `json:"at"`
	Workers     int      `json:"workers,omitempty"`
	AddNetDelay Duration `json:"add_net_delay,omitempty"`
	Load        float64  `json:"load,omitempty"`
}

// RetryFile is Retry in the scenario file format.
type RetryFile struct {
	MaxRetries int      `json:"max_retries,omitempty"`
	Backoff    Duration `json:"backoff,omitempty"`
}

// QueueFile is ClientQueue in the scenario file format.
type QueueFile struct {
	Max     int      `json:"max,omitempty"`
	MaxWait Duration `json:"max_wait,omitempty"`
}

// ParseScenario reads one scenario in the scenario file format, rejecting
// unknown fields, and returns it normalized.
func ParseScenario(r io.Reader) (Scenario, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Scenario{}, fmt.Errorf("sim: reading scenario: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f ScenarioFile
	if err := dec.Decode(&f); err != nil {
		return Scenario{}, fmt.Errorf("%w: parsing scenario file: %w", ErrInvalidScenario, err)
	}
	return fromFile(f).Normalize()
}

func fromFile(f ScenarioFile) Scenario {
	sc := Scenario{
		Name: f.Name, About: f.About, Seed: f.Seed,
		Duration: time.Duration(f.Duration), Warmup: time.Duration(f.Warmup),
		Settle: time.Duration(f.Settle), Workers: f.Workers,
		Service: Dist{Kind: f.Service.Kind, Mean: time.Duration(f.Service.Mean), Sigma: f.Service.Sigma,
			SlowFraction: f.Service.SlowFraction, SlowFactor: f.Service.SlowFactor},
		NetDelay: time.Duration(f.NetDelay), Deadline: time.Duration(f.Deadline),
		Arrivals: Arrivals{Kind: f.Arrivals.Kind, Load: f.Arrivals.Load, Rate: f.Arrivals.Rate,
			BurstFactor: f.Arrivals.BurstFactor, BurstOn: time.Duration(f.Arrivals.BurstOn),
			BurstOff: time.Duration(f.Arrivals.BurstOff)},
		Costs: f.Costs, Classes: f.Classes,
		Retry:       Retry{MaxRetries: f.Retry.MaxRetries, Backoff: time.Duration(f.Retry.Backoff)},
		Queue:       ClientQueue{Max: f.Queue.Max, MaxWait: time.Duration(f.Queue.MaxWait)},
		SkipExpired: f.SkipExpired, Tick: time.Duration(f.Tick), Band: f.Band,
		ConvWindow: time.Duration(f.ConvWindow),
	}
	if sc.Name == "" {
		sc.Name = "file"
	}
	for _, s := range f.Steps {
		sc.Steps = append(sc.Steps, Step{At: time.Duration(s.At), Workers: s.Workers,
			AddNetDelay: time.Duration(s.AddNetDelay), Load: s.Load})
	}
	return sc
}

func toFile(sc Scenario) ScenarioFile {
	f := ScenarioFile{
		Name: sc.Name, About: sc.About, Seed: sc.Seed,
		Duration: Duration(sc.Duration), Warmup: Duration(sc.Warmup),
		Settle: Duration(sc.Settle), Workers: sc.Workers,
		Service: DistFile{Kind: sc.Service.Kind, Mean: Duration(sc.Service.Mean), Sigma: sc.Service.Sigma,
			SlowFraction: sc.Service.SlowFraction, SlowFactor: sc.Service.SlowFactor},
		NetDelay: Duration(sc.NetDelay), Deadline: Duration(sc.Deadline),
		Arrivals: ArrivalFile{Kind: sc.Arrivals.Kind, Load: sc.Arrivals.Load, Rate: sc.Arrivals.Rate,
			BurstFactor: sc.Arrivals.BurstFactor, BurstOn: Duration(sc.Arrivals.BurstOn),
			BurstOff: Duration(sc.Arrivals.BurstOff)},
		Costs: sc.Costs, Classes: sc.Classes,
		Retry:       RetryFile{MaxRetries: sc.Retry.MaxRetries, Backoff: Duration(sc.Retry.Backoff)},
		Queue:       QueueFile{Max: sc.Queue.Max, MaxWait: Duration(sc.Queue.MaxWait)},
		SkipExpired: sc.SkipExpired, Tick: Duration(sc.Tick), Band: sc.Band,
		ConvWindow: Duration(sc.ConvWindow),
	}
	for _, s := range sc.Steps {
		f.Steps = append(f.Steps, StepFile{At: Duration(s.At), Workers: s.Workers,
			AddNetDelay: Duration(s.AddNetDelay), Load: s.Load})
	}
	return f
}
