package jepsen

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/raftmq/raftmq/wire"
)

// keptQueuesLimit bounds the copy of one member's ConsumeQueues made
// before a wipe.
const keptQueuesLimit = 64 << 20

// keptQueueTopics are the topics whose ConsumeQueues are copied before a
// nemesis wipes a member's data, smallest first so that a copy near the
// limit still has them: the retry group's %RETRY% and %DLQ% queues, the
// ordered, retry and timer topics, then the main topic.
var keptQueueTopics = []string{
	wire.RetryGroupTopicPrefix + RetryGroup, wire.DLQGroupTopicPrefix + RetryGroup,
	OrderTopic, RetryTopic, TimerTopic, Topic,
}

// keepQueuesOf copies node n's ConsumeQueues of keptQueueTopics into the
// cluster's KeepQueuesDir, under a directory numbered by wipe, before its
// data is wiped: a divergence the final read finds later can then be
// compared with what the wiped member held, byte for byte. It says what
// it kept (for the window's detail); "" when the cluster keeps nothing.
func (c *Cluster) keepQueuesOf(n *Node) string {
	if c.cfg.KeepQueuesDir == "" {
		return ""
	}
	name := fmt.Sprintf("%02d-%s", c.wipes.Add(1), n.ID)
	where := filepath.Join(filepath.Base(c.cfg.KeepQueuesDir), name)
	kept, skipped, bytes, err := keepQueues(n.DataDir, filepath.Join(c.cfg.KeepQueuesDir, name), keptQueueTopics, keptQueuesLimit)
	s := fmt.Sprintf("ConsumeQueues kept in %s (%d topics, %d KiB)", where, len(kept), bytes>>10)
	if len(skipped) > 0 {
		s += fmt.Sprintf(", not kept (over %d MiB): %s", keptQueuesLimit>>20, strings.Join(skipped, ", "))
	}
	if err != nil {
		s += "; keeping them: " + err.Error()
	}
	return s
}

// keepQueues copies dataDir/consumequeue/TOPIC of each of topics (those
// that exist) to dest/consumequeue/TOPIC, files and layout unchanged. A
// topic whose files would take the copy past limit bytes is skipped and
// named in skipped (with its size); kept names the topics copied and
// bytes counts their files.
func keepQueues(dataDir, dest string, topics []string, limit int64) (kept, skipped []string, bytes int64, err error) {
	var errs []error
	for _, topic := range topics {
		src := filepath.Join(dataDir, "consumequeue", topic)
		size, serr := treeSize(src)
		if errors.Is(serr, fs.ErrNotExist) {
			continue
		}
		if serr != nil {
			errs = append(errs, serr)
			continue
		}
		if bytes+size > limit {
			skipped = append(skipped, fmt.Sprintf("%s (%d MiB)", topic, size>>20))
			continue
		}
		if cerr := copyTree(src, filepath.Join(dest, "consumequeue", topic)); cerr != nil {
			errs = append(errs, cerr)
			continue
		}
		kept = append(kept, topic)
		bytes += size
	}
	return kept, skipped, bytes, errors.Join(errs...)
}

// treeSize is the bytes of the regular files under dir.
func treeSize(dir string) (int64, error) {
	if _, err := os.Stat(dir); err != nil {
		return 0, err
	}
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	return n, err
}

// copyTree copies the regular files under src to the same paths under
// dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type().IsRegular():
			return copyFile(path, to)
		}
		return nil
	})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
