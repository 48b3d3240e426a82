package client

import (
	"fmt"
	"slices"
)

// AllocateStrategy decides which queues of a topic one consumer of a group
// consumes (RocketMQ's AllocateMessageQueueStrategy). Every consumer runs
// the same strategy over the same inputs, sorted the same way (see
// SortQueues and slices.Sort for consumer ids), and takes its own share;
// the strategies are pure functions of their inputs so that the shares fit
// together without any coordination.
type AllocateStrategy interface {
	// Name is RocketMQ's strategy name ("AVG", "AVG_BY_CIRCLE", ...),
	// reported in consumer running info.
	Name() string
	// Allocate returns currentCID's queues out of mqAll, given every
	// consumer id of the group in cidAll. An empty currentCID, mqAll or
	// cidAll is an error (ErrInvalidStrategyInput); a currentCID missing
	// from cidAll gets no queues (it is leaving or not yet registered).
	Allocate(group, currentCID string, mqAll []MessageQueue, cidAll []string) ([]MessageQueue, error)
}

// checkAllocateInput is AbstractAllocateMessageQueueStrategy.check: false
// with no error means "not in the group, allocate nothing".
func checkAllocateInput(group, currentCID string, mqAll []MessageQueue, cidAll []string) (bool, error) {
	if currentCID == "" {
		return false, fmt.Errorf("%w: current consumer id is empty (group %s)", ErrInvalidStrategyInput, group)
	}
	if len(mqAll) == 0 {
		return false, fmt.Errorf("%w: no message queues (group %s)", ErrInvalidStrategyInput, group)
	}
	if len(cidAll) == 0 {
		return false, fmt.Errorf("%w: no consumer ids (group %s)", ErrInvalidStrategyInput, group)
	}
	return slices.Contains(cidAll, currentCID), nil
}

// averagely is AllocateMessageQueueAveragely: consumers get contiguous
// ranges; the first len(mqAll)%len(cidAll) consumers get one queue more.
type averagely struct{}

// AllocateAveragely returns RocketMQ's default strategy ("AVG"): queues are
// cut into contiguous, near-equal ranges in consumer order. With 8 queues
// and 3 consumers: 0-2, 3-5, 6-7.
func AllocateAveragely() AllocateStrategy { return averagely{} }

func (averagely) Name() string { return "AVG" }

func (averagely) Allocate(group, currentCID string, mqAll []MessageQueue, cidAll []string) ([]MessageQueue, error) {
	ok, err := checkAllocateInput(group, currentCID, mqAll, cidAll)
	if !ok {
		return nil, err
	}
	index := slices.Index(cidAll, currentCID)
	n, c := len(mqAll), len(cidAll)
	mod := n % c
	var size int
	switch {
	case n <= c:
		size = 1
	case mod > 0 && index < mod:
		size = n/c + 1
	default:
		size = n / c
	}
	start := index*size + mod
	if mod > 0 && index < mod {
		start = index * size
	}
	count := min(size, n-start)
	if count <= 0 {
		return nil, nil
	}
	return slices.Clone(mqAll[start : start+count]), nil
}

// averagelyByCircle is AllocateMessageQueueAveragelyByCircle.
type averagelyByCircle struct{}

// AllocateAveragelyByCircle returns the round-robin strategy
// ("AVG_BY_CIRCLE"): queue i goes to consumer i mod len(consumers). With 8
// queues and 3 consumers: {0,3,6}, {1,4,7}, {2,5}.
func AllocateAveragelyByCircle() AllocateStrategy { return averagelyByCircle{} }

func (averagelyByCircle) Name() string { return "AVG_BY_CIRCLE" }

func (averagelyByCircle) Allocate(group, currentCID string, mqAll []MessageQueue, cidAll []string) ([]MessageQueue, error) {
	ok, err := checkAllocateInput(group, currentCID, mqAll, cidAll)
	if !ok {
		return nil, err
	}
	index := slices.Index(cidAll, currentCID)
	var out []MessageQueue
	for i := index; i < len(mqAll); i += len(cidAll) {
		out = append(out, mqAll[i])
	}
	return out, nil
}

// byConfig is AllocateMessageQueueByConfig.
type byConfig struct{ queues []MessageQueue }

// AllocateByConfig returns the fixed-assignment strategy ("CONFIG"): this
// consumer always takes exactly queues, whatever the group looks like.
// Each consumer is configured with its own list; nothing checks that the
// lists cover every queue once — that is the operator's job, as in
// RocketMQ, which does not even check its inputs for this strategy.
func AllocateByConfig(queues []MessageQueue) AllocateStrategy {
	return byConfig{queues: slices.Clone(queues)}
}

func (byConfig) Name() string { return "CONFIG" }

func (s byConfig) Allocate(_, _ string, _ []MessageQueue, _ []string) ([]MessageQueue, error) {
	return slices.Clone(s.queues), nil
}
