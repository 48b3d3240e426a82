package jepsen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"go.uber.org/zap"
)

// mountTmpfs mounts a tmpfs of size bytes on dir (root only). tmpfs
// rather than a loop-mounted image: no mkfs or loop device needed, and
// ENOSPC comes exactly at the size.
func (c *Cluster) mountTmpfs(dir string, size int64) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: mounting a tmpfs needs root", ErrUnsupported)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		return fmt.Errorf("%w: mount tmpfs on %s: %v", ErrUnsupported, dir, err)
	}
	c.tmpfs = dir
	c.log.Info("tmpfs mounted", zap.String("dir", dir), zap.Int64("bytes", size))
	return nil
}

// unmountTmpfs detaches the tmpfs (lazily, in case a killed process's
// mapping is still being torn down); its contents are gone afterwards.
func (c *Cluster) unmountTmpfs() {
	if c.tmpfs == "" {
		return
	}
	if err := syscall.Unmount(c.tmpfs, syscall.MNT_DETACH); err != nil {
		c.log.Warn("tmpfs unmount", zap.String("dir", c.tmpfs), zap.Error(err))
	}
	c.tmpfs = ""
}

// TmpfsNode is the node whose data directory is a small tmpfs, or -1.
func (c *Cluster) TmpfsNode() int {
	if c.tmpfs == "" {
		return -1
	}
	return c.cfg.TmpfsNode
}

// diskFullNemesis fills the tmpfs under one node's data directory to the
// last byte with a filler file while the workload goes on, and removes
// the filler on heal. The node must refuse writes (disk full) rather than
// acknowledge what it cannot store, keep serving reads, and lose nothing
// it acknowledged before.
type diskFullNemesis struct{ filler string }

func (d *diskFullNemesis) Name() string { return "disk-full" }

func (d *diskFullNemesis) Inject(ctx context.Context, env *Env) (string, error) {
	c := env.Cluster
	i := c.TmpfsNode()
	if i < 0 {
		return "", fmt.Errorf("%w: no node has a tmpfs data directory (needs root)", ErrUnsupported)
	}
	role := "follower"
	if c.Leader(ctx) == i {
		role = "leader"
	}
	d.filler = filepath.Join(c.Nodes[i].DataDir, "jepsen-filler")
	n, err := fillDisk(d.filler)
	if err != nil {
		return "", err
	}
	var st syscall.Statfs_t
	free := int64(-1)
	if syscall.Statfs(c.Nodes[i].DataDir, &st) == nil {
		free = int64(st.Bavail) * int64(st.Bsize)
	}
	return fmt.Sprintf("fill %s's tmpfs (%s): filler %d KiB, %d B left", c.Nodes[i].ID, role, n>>10, free), nil
}

func (d *diskFullNemesis) Heal(context.Context, *Env) error {
	if d.filler == "" {
		return nil
	}
	err := os.Remove(d.filler)
	d.filler = ""
	return err
}

// fillDisk writes path until the file system says ENOSPC, first in 1 MiB
// chunks, then in 4 KiB ones, and syncs it so the blocks are really taken.
// It returns the bytes written.
func fillDisk(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var total int64
	for _, size := range []int{1 << 20, 4 << 10, 512} {
		buf := make([]byte, size)
		for {
			n, err := f.Write(buf)
			total += int64(n)
			if err == nil {
				continue
			}
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			_ = os.Remove(path)
			return total, err
		}
	}
	_ = f.Sync()
	return total, nil
}
