package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// putOrderConf is what mqadmin updateTopic -o true does after creating the
// topic (UpdateTopicSubCommand, DefaultMQAdminExtImpl.createOrUpdateOrderConf):
// it writes the topic's order config, "brokerName:writeQueueNums" per
// group, in the name servers' ORDER_TOPIC_CONFIG namespace, which routes
// carry under orderMessageEnable. With -c it is every group of the
// cluster; with -b the group of that broker, merged into the entries
// already there. It returns the entry written (the cluster's whole
// config, or the one group's entry, as mqadmin prints them).
func (s *adminSession) putOrderConf(ctx context.Context, topic string, writeQueues int, cluster, brokerAddr string) (string, error) {
	h := &wire.KVConfigRequestHeader{Namespace: wire.NamespaceOrderTopicConfig, Key: topic}
	put := func(value string) error {
		_, err := s.eachNameServer(ctx, remoting.RequestPutKVConfig,
			&wire.PutKVConfigRequestHeader{Namespace: h.Namespace, Key: h.Key, Value: value}, nil)
		return err
	}
	if cluster != "" {
		names, err := s.a.ClusterGroups(ctx, cluster)
		if err != nil {
			return "", err
		}
		entries := make([]string, 0, len(names))
		for _, n := range names {
			entries = append(entries, fmt.Sprintf("%s:%d", n, writeQueues))
		}
		value := strings.Join(entries, ";")
		return value, put(value)
	}
	name, err := s.groupOf(ctx, brokerAddr)
	if err != nil {
		return "", err
	}
	entry := fmt.Sprintf("%s:%d", name, writeQueues)
	byGroup := map[string]string{}
	resp, err := s.a.NameServerRequest(ctx, remoting.RequestGetKVConfig, h, nil)
	var be *client.BrokerError
	switch {
	case err == nil:
		var gh wire.GetKVConfigResponseHeader
		if err := resp.DecodeHeader(&gh); err != nil {
			return "", err
		}
		for _, e := range strings.Split(gh.Value, ";") {
			if g, _, ok := strings.Cut(e, ":"); ok && g != "" {
				byGroup[g] = e
			}
		}
	case errors.As(err, &be) && be.Code == remoting.ResponseQueryNotFound:
	default:
		// Put without the entries already there would drop them.
		return "", fmt.Errorf("read the order config of %s to merge %s into it: %w", topic, entry, err)
	}
	byGroup[name] = entry
	var all []string
	for _, g := range slices.Sorted(maps.Keys(byGroup)) {
		all = append(all, byGroup[g])
	}
	return entry, put(strings.Join(all, ";"))
}

// groupOf names the broker group addr is a registered member of.
func (s *adminSession) groupOf(ctx context.Context, addr string) (string, error) {
	ci, err := s.a.ClusterInfo(ctx)
	if err != nil {
		return "", err
	}
	for _, name := range slices.Sorted(maps.Keys(ci.BrokerAddrTable)) {
		if slices.Contains(slices.Collect(maps.Values(ci.BrokerAddrTable[name].BrokerAddrs)), addr) {
			return name, nil
		}
	}
	return "", fmt.Errorf("%w: broker %s is not registered with the name servers: cannot tell its group", errNotFound, addr)
}
