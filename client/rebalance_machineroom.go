package client

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// byMachineRoom is AllocateMessageQueueByMachineRoom.
type byMachineRoom struct{ idcs map[string]bool }

// AllocateByMachineRoom returns the machine-room strategy ("MACHINE_ROOM"):
// broker names follow the "<idc>@<name>" convention, only queues of brokers
// in consumerIDCs are consumed, and those are split like
// AllocateAveragely but with the remainder handed out one per consumer at
// the end: with q queues and c consumers, consumer i takes the block
// [i·(q/c), (i+1)·(q/c)) plus queue i + (q/c)·c when i < q mod c. Queues of
// other rooms, and broker names without exactly one '@', are not consumed
// by this group.
func AllocateByMachineRoom(consumerIDCs []string) AllocateStrategy {
	s := byMachineRoom{idcs: make(map[string]bool, len(consumerIDCs))}
	for _, idc := range consumerIDCs {
		s.idcs[idc] = true
	}
	return s
}

func (byMachineRoom) Name() string { return "MACHINE_ROOM" }

func (s byMachineRoom) Allocate(group, currentCID string, mqAll []MessageQueue, cidAll []string) ([]MessageQueue, error) {
	ok, err := checkAllocateInput(group, currentCID, mqAll, cidAll)
	if !ok {
		return nil, err
	}
	index := slices.Index(cidAll, currentCID)
	var pre []MessageQueue
	for _, mq := range mqAll {
		// Java's split("@") drops trailing empty strings, so "idc@" has
		// one part and "idc@a@b" three: both are skipped, as here.
		parts := strings.Split(mq.BrokerName, "@")
		for len(parts) > 0 && parts[len(parts)-1] == "" {
			parts = parts[:len(parts)-1]
		}
		if len(parts) == 2 && s.idcs[parts[0]] {
			pre = append(pre, mq)
		}
	}
	c := len(cidAll)
	per, rem := len(pre)/c, len(pre)%c
	out := slices.Clone(pre[per*index : per*index+per])
	if rem > index {
		out = append(out, pre[index+per*c])
	}
	return out, nil
}

// MachineRoomResolver tells AllocateMachineRoomNearby where brokers and
// consumers are deployed. Both answers must be non-empty.
type MachineRoomResolver interface {
	// BrokerDeployIn returns the machine room of the queue's broker.
	BrokerDeployIn(mq MessageQueue) string
	// ConsumerDeployIn returns the machine room of a consumer id.
	ConsumerDeployIn(clientID string) string
}

// MachineRoomResolverFuncs adapts two functions to MachineRoomResolver.
type MachineRoomResolverFuncs struct {
	// Broker implements BrokerDeployIn.
	Broker func(MessageQueue) string
	// Consumer implements ConsumerDeployIn.
	Consumer func(string) string
}

// BrokerDeployIn calls Broker.
func (f MachineRoomResolverFuncs) BrokerDeployIn(mq MessageQueue) string { return f.Broker(mq) }

// ConsumerDeployIn calls Consumer.
func (f MachineRoomResolverFuncs) ConsumerDeployIn(cid string) string { return f.Consumer(cid) }

// machineRoomNearby is AllocateMachineRoomNearby.
type machineRoomNearby struct {
	inner    AllocateStrategy
	resolver MachineRoomResolver
}

// AllocateMachineRoomNearby wraps another strategy ("MACHINE_ROOM_NEARBY-"
// + its name): queues are grouped by the machine room of their broker and
// consumers by theirs; each consumer first shares, with inner, the queues
// of its own room among the consumers of that room; queues of rooms with
// no consumer at all are shared, with inner, among every consumer, room
// by room in room-name order. A queue is never consumed across rooms while
// its own room has a live consumer.
func AllocateMachineRoomNearby(inner AllocateStrategy, resolver MachineRoomResolver) (AllocateStrategy, error) {
	if inner == nil || resolver == nil {
		return nil, fmt.Errorf("%w: AllocateMachineRoomNearby needs a strategy and a resolver", ErrInvalidOption)
	}
	return machineRoomNearby{inner: inner, resolver: resolver}, nil
}

func (s machineRoomNearby) Name() string { return "MACHINE_ROOM_NEARBY-" + s.inner.Name() }

func (s machineRoomNearby) Allocate(group, currentCID string, mqAll []MessageQueue, cidAll []string) ([]MessageQueue, error) {
	ok, err := checkAllocateInput(group, currentCID, mqAll, cidAll)
	if !ok {
		return nil, err
	}
	mr2mq := map[string][]MessageQueue{}
	for _, mq := range mqAll {
		room := s.resolver.BrokerDeployIn(mq)
		if room == "" {
			return nil, fmt.Errorf("%w: machine room is empty for %s", ErrInvalidStrategyInput, mq)
		}
		mr2mq[room] = append(mr2mq[room], mq)
	}
	mr2c := map[string][]string{}
	for _, cid := range cidAll {
		room := s.resolver.ConsumerDeployIn(cid)
		if room == "" {
			return nil, fmt.Errorf("%w: machine room is empty for consumer %s", ErrInvalidStrategyInput, cid)
		}
		mr2c[room] = append(mr2c[room], cid)
	}
	var out []MessageQueue
	current := s.resolver.ConsumerDeployIn(currentCID)
	if mqs := mr2mq[current]; len(mqs) > 0 {
		got, err := s.inner.Allocate(group, currentCID, mqs, mr2c[current])
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	delete(mr2mq, current)
	rooms := make([]string, 0, len(mr2mq))
	for room := range mr2mq {
		rooms = append(rooms, room)
	}
	sort.Strings(rooms) // Java iterates a TreeMap
	for _, room := range rooms {
		if _, alive := mr2c[room]; alive {
			continue
		}
		got, err := s.inner.Allocate(group, currentCID, mr2mq[room], cidAll)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}
