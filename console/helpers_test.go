package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/console"
	"github.com/raftmq/raftmq/internal/devcluster"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

const (
	testTopic = "ConsoleTopic"
	testGroup = "ConsoleGroup"
	adminAK   = "consoleAdmin"
	adminSK   = "console-secret-12345"
)

// env is a live 3-member group with the console served over HTTP.
type env struct {
	c    *devcluster.Cluster
	con  *console.Console
	url  string
	adm  *client.Admin
	prod *client.Producer
}

// startEnv starts a cluster, a console with the given account and a
// producer; the topic exists with 4 queues.
func startEnv(t *testing.T, ak, sk string) *env {
	t.Helper()
	c := devcluster.MustStart(t, devcluster.Options{InMemory: true, Configure: func(_, _ int, cfg *broker.BrokerConfig) {
		cfg.ConsumerOffsetCommitCoalescer = 10 * time.Millisecond
	}})
	con, err := console.New(c.Namesrv(), console.Options{AccessKey: ak, SecretKey: sk, CacheFor: 100 * time.Millisecond,
		// Generous: the suite shares two cores with -race and other packages.
		ReadTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con.Handler())
	e := &env{c: c, con: con, url: srv.URL}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if e.adm, err = client.NewAdmin(client.NameServers(c.NamesrvAddr())); err != nil {
		t.Fatal(err)
	}
	if _, err := e.adm.CreateTopic(ctx, client.TopicSpec{Topic: testTopic, ReadQueueNums: 4, WriteQueueNums: 4}, "DefaultCluster", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.adm.UpdateSubscriptionGroup(ctx, wire.DefaultSubscriptionGroupConfig(testGroup), "DefaultCluster", ""); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the topic's route", func() bool {
		_, err := e.adm.TopicRoute(ctx, testTopic)
		return err == nil
	})
	if e.prod, err = client.NewProducer(client.NameServers(c.NamesrvAddr()), client.ProducerGroup("ConsoleProducer")); err != nil {
		t.Fatal(err)
	}
	if err := e.prod.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.prod.Close(context.Background())
		_ = e.adm.Close(context.Background())
		srv.Close()
		_ = con.Close()
	})
	return e
}

// send stores n messages with key and returns the last result.
func (e *env) send(t *testing.T, n int, key string) *client.SendResult {
	t.Helper()
	var last *client.SendResult
	for i := range n {
		res, err := e.prod.SendSync(context.Background(), &client.Message{Topic: testTopic, Keys: []string{key}, Tags: "TagA",
			Body: fmt.Appendf(nil, "hello console %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		last = res
	}
	return last
}

// commit sets testGroup's offset on one queue of the leader of broker-a.
func (e *env) commit(t *testing.T, queue int32, offset int64) {
	t.Helper()
	addr := e.c.RoutedLeader(0)
	_, err := e.adm.BrokerRequest(context.Background(), addr, remoting.RequestUpdateConsumerOffset,
		&wire.UpdateConsumerOffsetRequestHeader{ConsumerGroup: testGroup, Topic: testTopic, QueueID: queue, CommitOffset: offset}, nil)
	if err != nil {
		t.Fatal(err)
	}
}

// call does one HTTP request against the console; auth is "ak:sk" or "".
func (e *env) call(t *testing.T, method, path, auth, contentType, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		ak, sk, _ := strings.Cut(auth, ":")
		req.SetBasicAuth(ak, sk)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// get decodes a 200 JSON answer into v.
func (e *env) get(t *testing.T, path, auth string, v any) {
	t.Helper()
	code, b := e.call(t, http.MethodGet, path, auth, "", "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, b)
	}
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
}
