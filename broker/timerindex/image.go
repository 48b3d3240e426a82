package timerindex

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

// The image: the index as of its applied mark, written into a snapshot so
// that a replica installing the snapshot holds the same bucket files as
// its peers at that point (the cursor counts records by position, and the
// records of timer messages stored before the snapshot exist nowhere else
// on that replica).
//
// Layout: the magic, the applied mark (8 bytes LE), a count n (4), n pairs
// of a bucket and its size in bytes (8+8), a CRC32-C of all that (4); then
// each bucket's bytes in that order, and a CRC32-C of those bytes (4).

const imageMagic = "RMQTIMR1"

// maxImageBuckets bounds the buckets an image header may list.
const maxImageBuckets = maxSynced

// imageChunk is how many bytes an image is copied with at a time.
const imageChunk = readChunk * RecordSize

// Cut is the index's files as of its applied mark: what a snapshot taken at
// that point carries.
type Cut struct {
	// Applied is the index's applied mark at the cut.
	Applied uint64
	sizes   []bucketSize
}

// Cut records every bucket file's size at the applied mark. It is taken
// where no entry is being applied (the FSM goroutine, between entries),
// and is written out later by WriteImage, before the next Sync.
func (x *Index) Cut() (Cut, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return Cut{}, ErrClosed
	}
	sizes, err := x.sizesAtAppliedLocked()
	if err != nil {
		return Cut{}, fmt.Errorf("timerindex: cut: %w", err)
	}
	return Cut{Applied: x.applied, sizes: sizes}, nil
}

// Empty reports whether the cut has nothing to carry: an index never
// written (no image is written for it, so snapshots of groups without
// timers keep their bytes).
func (c Cut) Empty() bool { return c.Applied == 0 && len(c.sizes) == 0 }

// WriteImage writes the cut to w: each bucket's first size bytes, read from
// its file or, if an advance set the file aside since the cut, from the
// set-aside file. Appends since the cut only extend files and set-aside
// files are removed only by Sync, so the bytes are those of the cut as
// long as no Sync ran in between.
func (x *Index) WriteImage(w io.Writer, c Cut) error {
	head := []byte(imageMagic)
	head = binary.LittleEndian.AppendUint64(head, c.Applied)
	head = binary.LittleEndian.AppendUint32(head, uint32(len(c.sizes)))
	for _, bs := range c.sizes {
		head = binary.LittleEndian.AppendUint64(head, uint64(bs.bucket))
		head = binary.LittleEndian.AppendUint64(head, uint64(bs.size))
	}
	head = binary.LittleEndian.AppendUint32(head, crc32.Checksum(head, castagnoli))
	if _, err := w.Write(head); err != nil {
		return fmt.Errorf("timerindex: image: %w", err)
	}
	crc := crc32.New(castagnoli)
	out := io.MultiWriter(w, crc)
	buf := make([]byte, imageChunk)
	for _, bs := range c.sizes {
		if err := x.copyBucket(out, bs, buf); err != nil {
			return err
		}
	}
	if _, err := w.Write(binary.LittleEndian.AppendUint32(nil, crc.Sum32())); err != nil {
		return fmt.Errorf("timerindex: image: %w", err)
	}
	return nil
}

func (x *Index) copyBucket(w io.Writer, bs bucketSize, buf []byte) error {
	f, err := x.fs.OpenFile(x.path(bs.bucket), os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = x.fs.OpenFile(x.path(bs.bucket)+asideSuffix, os.O_RDONLY, 0)
	}
	if err != nil {
		return fmt.Errorf("timerindex: image of bucket %d: %w", bs.bucket, err)
	}
	defer f.Close()
	for off := int64(0); off < bs.size; {
		n := int(min(int64(len(buf)), bs.size-off))
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			return fmt.Errorf("timerindex: image of bucket %d at %d: %w", bs.bucket, off, err)
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return fmt.Errorf("timerindex: image: %w", err)
		}
		off += int64(n)
	}
	return nil
}

// Image is an image being read from a snapshot: its header, with the
// bucket bytes still in the reader.
type Image struct {
	// Applied is the applied mark of the index the image was cut from.
	Applied uint64
	sizes   []bucketSize
	r       io.Reader
}

// ReadImage reads an image's header from r. It returns nil and no error
// when r ends first (a snapshot written without one). Leading newlines
// (the end of the snapshot's JSON tables) are skipped.
func ReadImage(r io.Reader) (*Image, error) {
	br := bufio.NewReader(r)
	for {
		b, err := br.ReadByte()
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("timerindex: image: %w", err)
		}
		if b != '\n' {
			if err := br.UnreadByte(); err != nil {
				return nil, err
			}
			break
		}
	}
	head := make([]byte, len(imageMagic)+12)
	if _, err := io.ReadFull(br, head); err != nil {
		return nil, fmt.Errorf("timerindex: image header: %w", err)
	}
	if string(head[:len(imageMagic)]) != imageMagic {
		return nil, fmt.Errorf("%w: not a timer index image", ErrCorrupt)
	}
	n := binary.LittleEndian.Uint32(head[len(imageMagic)+8:])
	if n > maxImageBuckets {
		return nil, fmt.Errorf("%w: image lists %d buckets", ErrCorrupt, n)
	}
	// The pairs are read as they come, so a count that claims more than
	// the reader holds costs no more memory than the bytes really there.
	rest, err := readUpTo(br, int(n)*16+4)
	if err != nil {
		return nil, fmt.Errorf("timerindex: image header: %w", err)
	}
	all := append(head, rest[:len(rest)-4]...)
	if crc32.Checksum(all, castagnoli) != binary.LittleEndian.Uint32(rest[len(rest)-4:]) {
		return nil, fmt.Errorf("%w: image header checksum", ErrCorrupt)
	}
	img := &Image{Applied: binary.LittleEndian.Uint64(head[len(imageMagic):]), r: br}
	for p := rest[:len(rest)-4]; len(p) >= 16; p = p[16:] {
		bs := bucketSize{int64(binary.LittleEndian.Uint64(p)), int64(binary.LittleEndian.Uint64(p[8:]))}
		if bs.size < 0 || bs.size%RecordSize != 0 || bs.bucket < 0 {
			return nil, fmt.Errorf("%w: image bucket %d of %d bytes", ErrCorrupt, bs.bucket, bs.size)
		}
		img.sizes = append(img.sizes, bs)
	}
	return img, nil
}

// readUpTo reads exactly n bytes of r, growing its buffer as they arrive.
func readUpTo(r io.Reader, n int) ([]byte, error) {
	const step = 64 << 10
	b := make([]byte, 0, min(n, step))
	for len(b) < n {
		k := min(n-len(b), step)
		b = slices.Grow(b, k)
		if _, err := io.ReadFull(r, b[len(b):len(b)+k]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		b = b[:len(b)+k]
	}
	return b, nil
}

// Replace makes the index hold exactly the image's files, marked applied
// at the image's mark, durably (the synced mark lists them). First the
// index is emptied at mark 0 (durably), so a stop in the middle leaves an
// index that the next restore of the same snapshot replaces again; a
// checksum failure leaves it so too and returns ErrCorrupt.
func (x *Index) Replace(img *Image) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	if err := x.clearLocked(); err != nil {
		return err
	}
	crc := crc32.New(castagnoli)
	in := io.TeeReader(img.r, crc)
	buf := make([]byte, imageChunk)
	for _, bs := range img.sizes {
		if err := x.loadBucketLocked(in, bs, buf); err != nil {
			return err
		}
	}
	var sum [4]byte
	if _, err := io.ReadFull(img.r, sum[:]); err != nil {
		return fmt.Errorf("timerindex: image: %w", err)
	}
	if crc.Sum32() != binary.LittleEndian.Uint32(sum[:]) {
		return fmt.Errorf("%w: image checksum", ErrCorrupt)
	}
	for gid := range x.dirs {
		if err := x.fs.SyncDir(filepath.Join(x.dir, fmt.Sprint(gid))); err != nil {
			return fmt.Errorf("timerindex: %w", err)
		}
	}
	if err := x.fs.SyncDir(x.dir); err != nil {
		return fmt.Errorf("timerindex: %w", err)
	}
	if err := x.writeMarkLocked(img.Applied); err != nil {
		return err
	}
	if err := x.mark.Sync(); err != nil {
		return fmt.Errorf("timerindex: applied mark: %w", err)
	}
	if err := storage.WriteFileAtomic(x.fs, filepath.Join(x.dir, syncedName), encodeSynced(img.Applied, img.sizes)); err != nil {
		return fmt.Errorf("timerindex: synced mark: %w", err)
	}
	x.log.Info("timer index replaced by a snapshot's image", zap.Uint64("applied", img.Applied), zap.Int("buckets", len(img.sizes)))
	return nil
}

// clearLocked removes every bucket file and set-aside file and leaves the
// index empty at mark 0, durably.
func (x *Index) clearLocked() error {
	if err := x.fs.Remove(filepath.Join(x.dir, syncedName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("timerindex: %w", err)
	}
	if err := x.writeMarkLocked(0); err != nil {
		return err
	}
	if _, err := x.mark.WriteAt(encodeIntent(0, x.boot, nil), intentOff); err != nil {
		return fmt.Errorf("timerindex: intent: %w", err)
	}
	if err := x.mark.Sync(); err != nil {
		return fmt.Errorf("timerindex: applied mark: %w", err)
	}
	for b, of := range x.open {
		of.f.Close()
		delete(x.open, b)
	}
	if err := x.walk(func(gid int64, name string) error {
		return x.fs.Remove(filepath.Join(x.dir, fmt.Sprint(gid), name))
	}); err != nil {
		return err
	}
	clear(x.present)
	clear(x.dirty)
	clear(x.removed)
	clear(x.groupMin)
	clear(x.gone)
	x.intentEntry, x.intent, x.aside = 0, x.intent[:0], x.aside[:0]
	return x.fs.SyncDir(x.dir)
}

// writeMarkLocked writes the applied mark (page cache only).
func (x *Index) writeMarkLocked(i uint64) error {
	var buf [20]byte
	binary.LittleEndian.PutUint64(buf[:8], i)
	binary.LittleEndian.PutUint64(buf[8:16], x.boot)
	binary.LittleEndian.PutUint32(buf[16:], crc32.Checksum(buf[:16], castagnoli))
	if _, err := x.mark.WriteAt(buf[:], 0); err != nil {
		return fmt.Errorf("timerindex: applied mark: %w", err)
	}
	x.applied = i
	return nil
}

// loadBucketLocked writes bucket bs.bucket's file from the image, durably.
func (x *Index) loadBucketLocked(r io.Reader, bs bucketSize, buf []byte) error {
	if bs.size == 0 {
		return nil
	}
	of, err := x.fileLocked(bs.bucket)
	if err != nil {
		return fmt.Errorf("timerindex: image bucket %d: %w", bs.bucket, err)
	}
	for off := int64(0); off < bs.size; {
		n := int(min(int64(len(buf)), bs.size-off))
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return fmt.Errorf("timerindex: image bucket %d: %w", bs.bucket, err)
		}
		if _, err := of.f.WriteAt(buf[:n], off); err != nil {
			return fmt.Errorf("timerindex: image bucket %d: %w", bs.bucket, err)
		}
		for i := 0; i+RecordSize <= n; i += RecordSize {
			if rec, err := DecodeRecord(buf[i:]); err == nil {
				x.noteMinLocked(bs.bucket, rec.QueueOffset)
			}
		}
		off += int64(n)
	}
	of.size = bs.size
	x.setBit(bs.bucket)
	if err := of.f.Sync(); err != nil {
		return fmt.Errorf("timerindex: image bucket %d: %w", bs.bucket, err)
	}
	return nil
}
