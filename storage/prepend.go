package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// Prepend creates (or, after an interrupted run, reopens) the file that
// lies just before the queue's first one and puts it at the front. A
// member that catches up on data older than what it holds fills such files
// (raftlog's backfill, ConsumeQueue backfill); their WrotePosition stays 0
// for a new file until the caller sets it. It fails on an empty queue or
// when the first file starts at offset 0.
func (q *MappedFileQueue) Prepend() (*MappedFile, error) { return q.prepend(nil) }

// PrependTo prepends files until one holds offset (see Prepend).
func (q *MappedFileQueue) PrependTo(offset int64) error { return q.prependTo(offset, nil) }

// PrependToFilled prepends files until one holds offset, each new file
// holding fill repeated over its whole size (len(fill) must divide the file
// size) before its name exists: it is written under a temporary name,
// synced and renamed into place (WriteFileAtomic). A crash therefore never
// leaves a prepended file of zeros in front of the queue, which a recovery
// scan could not tell from the end of the data. Files already there are
// kept as they are.
func (q *MappedFileQueue) PrependToFilled(offset int64, fill []byte) error {
	if len(fill) == 0 || q.fileSize%len(fill) != 0 {
		return fmt.Errorf("%w: fill of %d bytes for files of %d in %s", ErrInvalidSize, len(fill), q.fileSize, q.dir)
	}
	return q.prependTo(offset, fill)
}

func (q *MappedFileQueue) prependTo(offset int64, fill []byte) error {
	for {
		if first := q.First(); first == nil || first.FileFromOffset() <= offset {
			return nil
		}
		if _, err := q.prepend(fill); err != nil {
			return err
		}
	}
}

func (q *MappedFileQueue) prepend(fill []byte) (*MappedFile, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.files) == 0 {
		return nil, fmt.Errorf("%w: prepend to the empty queue %s", ErrOutOfRange, q.dir)
	}
	from := q.files[0].FileFromOffset() - int64(q.fileSize)
	if from < 0 {
		return nil, fmt.Errorf("%w: prepend before offset 0 in %s", ErrOutOfRange, q.dir)
	}
	path := filepath.Join(q.dir, FileName(from))
	if fill != nil {
		_, err := q.fsys.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			err = WriteFileAtomic(q.fsys, path, bytes.Repeat(fill, q.fileSize/len(fill)))
		case err == nil:
			// Left by a run whose directory sync failed: its bytes were
			// synced before the rename, its name may not be yet.
			err = q.fsys.SyncDir(q.dir)
		}
		if err != nil {
			return nil, fmt.Errorf("prepend %s: %w", path, err)
		}
	}
	mf, err := OpenMappedFile(q.fsys, path, from, q.fileSize)
	if err != nil {
		return nil, err
	}
	if q.buffered {
		mf.SetBuffered(true)
	}
	q.files = append([]*MappedFile{mf}, q.files...)
	return mf, nil
}

// WriteAtDurable copies p to pos through the mapping and syncs exactly that
// range, without the file's lock during the sync and without marking the
// range for Flush. It is for a range no appender or reader touches yet (a
// backfill below the write position), so an append to the same file is
// never held up by it. The caller holds a reference (Retain).
func (m *MappedFile) WriteAtDurable(p []byte, pos int) error {
	if pos < 0 || pos+len(p) > m.size {
		return fmt.Errorf("%w: write [%d,%d) outside %s (size %d)", ErrOutOfRange, pos, pos+len(p), m.path, m.size)
	}
	if m.closed.Load() {
		return fmt.Errorf("%w: %s", ErrFileClosed, m.path)
	}
	copy(m.data[pos:], p)
	return m.file.Msync(m.data[pos : pos+len(p)])
}
