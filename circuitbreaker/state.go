package circuitbreaker

import "strconv"

// State is a breaker's state; see [Breaker.State]. Events and snapshots
// carry it as a resilience.Label.
type State uint8

// The states of a breaker. The first three are the automatic ones; the last
// three are set by configuration ([Config.Mode]) or by hand.
const (
	StateClosed State = iota
	StateOpen
	StateHalfOpen
	StateDisabled
	StateForcedOpen
	StateMetricsOnly
)

// States lists every state, in order, for one-hot gauges.
var States = [...]State{
	StateClosed, StateOpen, StateHalfOpen,
	StateDisabled, StateForcedOpen, StateMetricsOnly,
}

var stateNames = [...]string{"CLOSED", "OPEN", "HALF_OPEN", "DISABLED", "FORCED_OPEN", "METRICS_ONLY"}

// String returns the state's name as Resilience4j spells it: "CLOSED",
// "OPEN", "HALF_OPEN", "DISABLED", "FORCED_OPEN" or "METRICS_ONLY".
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Reason says why a breaker changed state; a transition event carries it as
// a resilience.Label.
type Reason uint8

const (
	// ReasonNone: no transition.
	ReasonNone Reason = iota
	// ReasonFailureRate: the failure rate reached its threshold.
	ReasonFailureRate
	// ReasonSlowCallRate: the slow-call rate reached its threshold.
	ReasonSlowCallRate
	// ReasonWaitElapsed: the wait in the open state is over.
	ReasonWaitElapsed
	// ReasonProbesSucceeded: the half-open probes were healthy enough.
	ReasonProbesSucceeded
	// ReasonHalfOpenTimeout: the probes took longer than the maximum wait in
	// the half-open state.
	ReasonHalfOpenTimeout
	// ReasonManual: an operator or program asked for the state.
	ReasonManual
)

var reasonNames = [...]string{
	"none", "failure_rate", "slow_call_rate", "wait_elapsed", "probes_succeeded", "half_open_timeout", "manual",
}

// String returns the reason's name, e.g. "failure_rate".
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}
