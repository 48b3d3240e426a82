package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/client"
)

// newConsumerProgressCmd is mqadmin consumerProgress -g [-t].
func newConsumerProgressCmd(f *adminFlags) *cobra.Command {
	var group, topic string
	cmd := &cobra.Command{
		Use:   "consumerProgress",
		Short: "Show a consumer group's offsets and lag per queue",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&group, "groupName", "g", "", "consumer group")
	cmd.Flags().StringVarP(&topic, "topicName", "t", "", "only this topic")
	required(cmd, "groupName")
	cmd.RunE = f.run(func(ctx context.Context, s *adminSession) error {
		qs, err := s.a.ConsumerProgress(ctx, group, topic)
		if err != nil {
			return err
		}
		type qp struct {
			Topic          string `json:"topic"`
			BrokerName     string `json:"brokerName"`
			QueueID        int    `json:"queueId"`
			BrokerOffset   int64  `json:"brokerOffset"`
			ConsumerOffset int64  `json:"consumerOffset"`
			Diff           int64  `json:"diff"`
			LastTimestamp  int64  `json:"lastTimestamp"`
		}
		out := []qp{}
		var total int64
		for _, q := range qs {
			last := int64(0)
			if !q.LastTimestamp.IsZero() {
				last = q.LastTimestamp.UnixMilli()
			}
			out = append(out, qp{q.Queue.Topic, q.Queue.BrokerName, q.Queue.QueueID, q.BrokerOffset, q.ConsumerOffset, q.Lag, last})
			total += q.Lag
		}
		slices.SortFunc(out, func(a, b qp) int {
			if c := strings.Compare(a.Topic, b.Topic); c != 0 {
				return c
			}
			if c := strings.Compare(a.BrokerName, b.BrokerName); c != 0 {
				return c
			}
			return a.QueueID - b.QueueID
		})
		res := struct {
			Group     string `json:"group"`
			DiffTotal int64  `json:"diffTotal"`
			Queues    []qp   `json:"queues"`
		}{group, total, out}
		return s.emit(res, func(tw *tabwriter.Writer) {
			row(tw, "#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime")
			for _, q := range out {
				last := "-"
				if q.LastTimestamp > 0 {
					last = fmtTime(time.UnixMilli(q.LastTimestamp))
				}
				row(tw, q.Topic, q.BrokerName, q.QueueID, q.BrokerOffset, q.ConsumerOffset, q.Diff, last)
			}
			fmt.Fprintf(tw, "\nDiff Total: %d\n", total)
		})
	})
	return cmd
}

// messageView is the JSON shape of a looked-up message.
type messageView struct {
	Topic          string            `json:"topic"`
	Tags           string            `json:"tags,omitempty"`
	Keys           []string          `json:"keys,omitempty"`
	MsgID          string            `json:"msgId"`
	OffsetMsgID    string            `json:"offsetMsgId"`
	QueueID        int32             `json:"queueId"`
	QueueOffset    int64             `json:"queueOffset"`
	CommitLogOff   int64             `json:"commitLogOffset"`
	BornTimestamp  int64             `json:"bornTimestamp"`
	StoreTimestamp int64             `json:"storeTimestamp"`
	BornHost       string            `json:"bornHost"`
	StoreHost      string            `json:"storeHost"`
	ReconsumeTimes int32             `json:"reconsumeTimes"`
	Properties     map[string]string `json:"properties,omitempty"`
	Body           string            `json:"body"`
}

func viewOf(m *client.MessageExt) messageView {
	return messageView{
		Topic: m.Topic, Tags: m.Tags, Keys: m.Keys, MsgID: m.MsgID, OffsetMsgID: m.OffsetMsgID, QueueID: m.QueueID,
		QueueOffset: m.QueueOffset, CommitLogOff: m.CommitLogOffset, BornTimestamp: m.BornTimestamp,
		StoreTimestamp: m.StoreTimestamp, BornHost: m.BornHost, StoreHost: m.StoreHost, ReconsumeTimes: m.ReconsumeTimes,
		Properties: m.Properties, Body: string(m.Body),
	}
}

// newQueryMsgByIDCmd is mqadmin queryMsgById -i (offset msgId).
func newQueryMsgByIDCmd(f *adminFlags) *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "queryMsgById",
		Short: "Show a message by its offset msgId (store host + CommitLog offset)",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&id, "msgId", "i", "", "offset message id (OffsetMsgID of the send result)")
	required(cmd, "msgId")
	cmd.RunE = f.run(func(ctx context.Context, s *adminSession) error {
		m, err := s.a.ViewMessage(ctx, id)
		if errors.Is(err, client.ErrMessageNotFound) {
			return fmt.Errorf("%w: no message with msgId %s: %v", errNotFound, id, err)
		}
		if err != nil {
			return err
		}
		v := viewOf(m)
		return s.emit(v, func(tw *tabwriter.Writer) {
			row(tw, "OffsetID:", v.OffsetMsgID)
			row(tw, "MsgID:", v.MsgID)
			row(tw, "Topic:", v.Topic)
			row(tw, "Tags:", "["+v.Tags+"]")
			row(tw, "Keys:", "["+strings.Join(v.Keys, " ")+"]")
			row(tw, "Queue ID:", v.QueueID)
			row(tw, "Queue Offset:", v.QueueOffset)
			row(tw, "CommitLog Offset:", v.CommitLogOff)
			row(tw, "Reconsume Times:", v.ReconsumeTimes)
			row(tw, "Born Timestamp:", fmtTime(time.UnixMilli(v.BornTimestamp)))
			row(tw, "Store Timestamp:", fmtTime(time.UnixMilli(v.StoreTimestamp)))
			row(tw, "Born Host:", v.BornHost)
			row(tw, "Store Host:", v.StoreHost)
			row(tw, "Body:", v.Body)
		})
	})
	return cmd
}

// newQueryMsgByKeyCmd is mqadmin queryMsgByKey -t -k.
func newQueryMsgByKeyCmd(f *adminFlags) *cobra.Command {
	var topic, key string
	var begin, end int64
	var maxNum int
	cmd := &cobra.Command{
		Use:   "queryMsgByKey",
		Short: "Find a topic's messages by key (through the brokers' index files)",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic name")
	cmd.Flags().StringVarP(&key, "msgKey", "k", "", "message key")
	cmd.Flags().Int64VarP(&begin, "beginTimestamp", "b", 0, "stored at or after (ms since epoch)")
	cmd.Flags().Int64VarP(&end, "endTimestamp", "e", 0, "stored at or before (ms since epoch; 0 = now)")
	cmd.Flags().IntVarP(&maxNum, "maxNum", "c", 64, "at most this many per broker group")
	required(cmd, "topic", "msgKey")
	cmd.RunE = f.run(func(ctx context.Context, s *adminSession) error {
		e := time.Now()
		if end > 0 {
			e = time.UnixMilli(end)
		}
		msgs, err := s.a.QueryMessageByKey(ctx, topic, key, maxNum, time.UnixMilli(begin), e)
		if errors.Is(err, client.ErrMessageNotFound) {
			return fmt.Errorf("%w: no message of topic %s with key %q: %v", errNotFound, topic, key, err)
		}
		if err != nil {
			return err
		}
		views := make([]messageView, 0, len(msgs))
		for _, m := range msgs {
			views = append(views, viewOf(m))
		}
		return s.emit(views, func(tw *tabwriter.Writer) {
			row(tw, "#Message ID", "#Offset Message ID", "#QID", "#Offset", "#Store Time")
			for _, v := range views {
				row(tw, v.MsgID, v.OffsetMsgID, v.QueueID, v.QueueOffset, fmtTime(time.UnixMilli(v.StoreTimestamp)))
			}
		})
	})
	return cmd
}

// parseResetTime reads mqadmin's -s: "now", milliseconds since the epoch,
// or yyyy-MM-dd#HH:mm:ss:SSS in local time.
func parseResetTime(s string) (time.Time, error) {
	if s == "now" {
		return time.Now(), nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	t, err := time.ParseInLocation("2006-01-02#15:04:05:000", s, time.Local)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: -s %q: want now, ms since the epoch or yyyy-MM-dd#HH:mm:ss:SSS", errAdminUsage, s)
	}
	return t, nil
}

// newResetOffsetByTimeCmd is mqadmin resetOffsetByTime -g -t -s.
func newResetOffsetByTimeCmd(f *adminFlags) *cobra.Command {
	var group, topic, ts, force string
	cmd := &cobra.Command{
		Use:   "resetOffsetByTime",
		Short: "Move a consumer group's offsets on a topic to the first message stored at or after a time",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&group, "group", "g", "", "consumer group")
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic name")
	cmd.Flags().StringVarP(&ts, "timestamp", "s", "", "now, ms since the epoch, or yyyy-MM-dd#HH:mm:ss:SSS")
	cmd.Flags().StringVarP(&force, "force", "f", "true", "true: move offsets either way; false: only backwards")
	required(cmd, "group", "topic", "timestamp")
	cmd.RunE = f.run(func(ctx context.Context, s *adminSession) error {
		t, err := parseResetTime(ts)
		if err != nil {
			return err
		}
		fb, err := strconv.ParseBool(force)
		if err != nil {
			return fmt.Errorf("%w: -f %q: want true or false", errAdminUsage, force)
		}
		offs, err := s.a.ResetOffsetByTime(ctx, group, topic, t, fb)
		if err != nil {
			return err
		}
		type ro struct {
			BrokerName string `json:"brokerName"`
			QueueID    int    `json:"queueId"`
			Offset     int64  `json:"offset"`
		}
		out := []ro{}
		for _, mq := range slices.SortedFunc(maps.Keys(offs), client.CompareQueues) {
			out = append(out, ro{mq.BrokerName, mq.QueueID, offs[mq]})
		}
		return s.emit(out, func(tw *tabwriter.Writer) {
			row(tw, "#brokerName", "#queueId", "#offset")
			for _, r := range out {
				row(tw, r.BrokerName, r.QueueID, r.Offset)
			}
		})
	})
	return cmd
}

// newGetBrokerConfigCmd is mqadmin getBrokerConfig -b.
func newGetBrokerConfigCmd(f *adminFlags) *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "getBrokerConfig",
		Short: "Show a broker's configuration",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&addr, "brokerAddr", "b", "", "broker address host:port")
	required(cmd, "brokerAddr")
	cmd.RunE = f.run(func(ctx context.Context, s *adminSession) error {
		kv, err := s.a.BrokerConfig(ctx, addr)
		if err != nil {
			return err
		}
		return s.emit(kv, func(tw *tabwriter.Writer) {
			fmt.Fprintf(tw, "============%s============\n", addr)
			for _, k := range slices.Sorted(maps.Keys(kv)) {
				row(tw, k, "=", kv[k])
			}
		})
	})
	return cmd
}

// newUpdateBrokerConfigCmd is mqadmin updateBrokerConfig -b|-c -k -v.
func newUpdateBrokerConfigCmd(f *adminFlags) *cobra.Command {
	var addr, cluster, key, value string
	cmd := &cobra.Command{
		Use:   "updateBrokerConfig",
		Short: "Update one broker config key on a broker (-b) or on every member of a cluster (-c)",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&addr, "brokerAddr", "b", "", "broker address host:port")
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "every broker of this cluster")
	cmd.Flags().StringVarP(&key, "key", "k", "", "config key")
	cmd.Flags().StringVarP(&value, "value", "v", "", "config value")
	required(cmd, "key", "value")
	cmd.RunE = f.run(func(ctx context.Context, s *adminSession) error {
		if (addr == "") == (cluster == "") {
			return fmt.Errorf("%w: updateBrokerConfig needs exactly one of -b brokerAddr or -c clusterName", errAdminUsage)
		}
		targets := []string{addr}
		if cluster != "" {
			ci, err := s.a.ClusterInfo(ctx)
			if err != nil {
				return err
			}
			targets = nil
			for _, m := range clusterMembers(ci, cluster) {
				targets = append(targets, m.Addr)
			}
			if len(targets) == 0 {
				return fmt.Errorf("%w: cluster %q has no registered broker", errNotFound, cluster)
			}
		}
		var errs []error
		var done []string
		for _, a := range targets {
			if err := s.a.UpdateBrokerConfig(ctx, a, map[string]string{key: value}); err != nil {
				errs = append(errs, err)
				continue
			}
			done = append(done, a)
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		return s.emit(map[string]any{"key": key, "value": value, "brokers": done}, func(tw *tabwriter.Writer) {
			for _, a := range done {
				fmt.Fprintf(tw, "update broker config success, %s\n", a)
			}
		})
	})
	return cmd
}

// newUpdateSubGroupCmd is mqadmin updateSubGroup -g -b|-c with its
// boolean/int options given as values (mqadmin style: -s true).
func newUpdateSubGroupCmd(f *adminFlags) *cobra.Command {
	var group, addr, cluster string
	var consumeEnable, fromMin, broadcast, orderly, notify string
	var retryQueues, retryMax int
	cmd := &cobra.Command{
		Use:   "updateSubGroup",
		Short: "Create or update a consumer (subscription) group on a broker (-b) or a cluster (-c)",
		Args:  cobra.NoArgs,
	}
	fl := cmd.Flags()
	fl.StringVarP(&group, "groupName", "g", "", "consumer group")
	fl.StringVarP(&addr, "brokerAddr", "b", "", "broker address host:port")
	fl.StringVarP(&cluster, "clusterName", "c", "", "every broker group of this cluster")
	fl.StringVarP(&consumeEnable, "consumeEnable", "s", "true", "consume enabled")
	fl.StringVarP(&fromMin, "consumeFromMinEnable", "m", "true", "consume from min offset when new")
	fl.StringVarP(&broadcast, "consumeBroadcastEnable", "d", "true", "broadcasting allowed")
	fl.StringVarP(&orderly, "consumeMessageOrderly", "o", "false", "orderly consumption")
	fl.StringVarP(&notify, "notifyConsumerIdsChanged", "a", "true", "notify consumers when the group changes")
	fl.IntVarP(&retryQueues, "retryQueueNums", "q", 1, "retry queue count")
	fl.IntVarP(&retryMax, "retryMaxTimes", "r", 16, "max redeliveries before the DLQ")
	required(cmd, "groupName")
	cmd.RunE = f.run(func(ctx context.Context, s *adminSession) error {
		if (addr == "") == (cluster == "") {
			return fmt.Errorf("%w: updateSubGroup needs exactly one of -b brokerAddr or -c clusterName", errAdminUsage)
		}
		sg := client.DefaultSubscriptionGroup(group)
		for _, b := range []struct {
			flag, v string
			dst     *bool
		}{{"-s", consumeEnable, &sg.ConsumeEnable}, {"-m", fromMin, &sg.ConsumeFromMinEnable},
			{"-d", broadcast, &sg.ConsumeBroadcastEnable}, {"-o", orderly, &sg.ConsumeMessageOrderly},
			{"-a", notify, &sg.NotifyConsumerIdsChangedEnable}} {
			v, err := strconv.ParseBool(b.v)
			if err != nil {
				return fmt.Errorf("%w: %s %q: want true or false", errAdminUsage, b.flag, b.v)
			}
			*b.dst = v
		}
		sg.RetryQueueNums, sg.RetryMaxTimes = retryQueues, retryMax
		if err := s.a.UpdateSubscriptionGroup(ctx, sg, cluster, addr); err != nil {
			return err
		}
		return s.emit(sg, func(tw *tabwriter.Writer) {
			fmt.Fprintf(tw, "create subscription group to %s%s success.\n", addr, cluster)
			fmt.Fprintf(tw, "%+v\n", sg)
		})
	})
	return cmd
}

// newSendMessageCmd is mqadmin sendMessage -t -p [-k] [-c].
func newSendMessageCmd(f *adminFlags) *cobra.Command {
	var topic, body, keys, tags string
	cmd := &cobra.Command{
		Use:   "sendMessage",
		Short: "Send one message and print where it was stored",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic name")
	cmd.Flags().StringVarP(&body, "body", "p", "", "message body")
	cmd.Flags().StringVarP(&keys, "keys", "k", "", "message keys (space separated)")
	cmd.Flags().StringVarP(&tags, "tags", "c", "", "message tag")
	required(cmd, "topic", "body")
	cmd.RunE = f.run(func(ctx context.Context, s *adminSession) error {
		p, err := client.NewProducer(client.NameServers(s.ns...), client.RequestTimeout(f.timeout), client.WithLogger(f.logger()),
			client.ProducerGroup(fmt.Sprintf("raftmq-admin-%d", os.Getpid())))
		if err != nil {
			return fmt.Errorf("%w: %v", errAdminUsage, err)
		}
		if err := p.Start(); err != nil {
			return err
		}
		defer func() { _ = p.Close() }()
		res, err := p.SendSync(ctx, &client.Message{Topic: topic, Body: []byte(body), Tags: tags, Keys: strings.Fields(keys)})
		if err != nil {
			return err
		}
		out := struct {
			BrokerName  string `json:"brokerName"`
			QueueID     int    `json:"queueId"`
			QueueOffset int64  `json:"queueOffset"`
			SendStatus  string `json:"sendStatus"`
			MsgID       string `json:"msgId"`
			OffsetMsgID string `json:"offsetMsgId"`
		}{res.Queue.BrokerName, res.Queue.QueueID, res.QueueOffset, res.Status.String(), res.MsgID, res.OffsetMsgID}
		return s.emit(out, func(tw *tabwriter.Writer) {
			row(tw, "#Broker Name", "#QID", "#Queue Offset", "#Send Result", "#MsgId", "#OffsetMsgId")
			row(tw, out.BrokerName, out.QueueID, out.QueueOffset, out.SendStatus, out.MsgID, out.OffsetMsgID)
		})
	})
	return cmd
}
