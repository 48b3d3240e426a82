package storage

import (
	"fmt"
	"path/filepath"
)

// Prepend creates (or, after an interrupted run, reopens) the file that
// lies just before the queue's first one and puts it at the front. A
// member that catches up on data older than what it holds fills such files
// (raftlog's backfill, ConsumeQueue backfill); their WrotePosition stays 0
// for a new file until the caller sets it. It fails on an empty queue or
// when the first file starts at offset 0.
func (q *MappedFileQueue) Prepend() (*MappedFile, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.files) == 0 {
		return nil, fmt.Errorf("%w: prepend to the empty queue %s", ErrOutOfRange, q.dir)
	}
	from := q.files[0].FileFromOffset() - int64(q.fileSize)
	if from < 0 {
		return nil, fmt.Errorf("%w: prepend before offset 0 in %s", ErrOutOfRange, q.dir)
	}
	mf, err := OpenMappedFile(q.fsys, filepath.Join(q.dir, FileName(from)), from, q.fileSize)
	if err != nil {
		return nil, err
	}
	if q.buffered {
		mf.SetBuffered(true)
	}
	q.files = append([]*MappedFile{mf}, q.files...)
	return mf, nil
}

// PrependTo prepends files until one holds offset (see Prepend).
func (q *MappedFileQueue) PrependTo(offset int64) error {
	for {
		if first := q.First(); first == nil || first.FileFromOffset() <= offset {
			return nil
		}
		if _, err := q.Prepend(); err != nil {
			return err
		}
	}
}
