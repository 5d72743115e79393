"""Which process sets exist, as Horovod's own tests read it: _get_process_set_ids_and_ranks(), a
removed set's id given to the next one added, duplicates refused at init and by
add_process_set, an id that names no set refused before anything runs, and str()."""
import pytest


def registry(hvd):
    return hvd.mpi_ops._basics._get_process_set_ids_and_ranks()


def test_ids_and_ranks_follow_adds_and_removes_and_reuse_ids(hvd):
    size = hvd.size()
    first = hvd.add_process_set([0])
    rest = hvd.add_process_set(range(1, size))
    try:
        assert registry(hvd) == {0: list(range(size)), first.process_set_id: [0],
                                 rest.process_set_id: list(range(1, size))}
        old = first.process_set_id
        assert hvd.remove_process_set(first) and first.process_set_id is None
        assert registry(hvd) == {0: list(range(size)), rest.process_set_id: list(range(1, size))}
        again = hvd.add_process_set([0])
        assert again.process_set_id == old  # the lowest free id, as in Horovod
        hvd.remove_process_set(again)
    finally:
        hvd.remove_process_set(rest)
    assert registry(hvd) == {0: list(range(size))}


def test_add_process_set_refuses_duplicates(hvd):
    size = hvd.size()
    rest = hvd.add_process_set(range(1, size))
    try:
        with pytest.raises(ValueError, match="duplicate process set"):
            hvd.add_process_set(reversed(range(1, size)))  # the order does not matter
        with pytest.raises(ValueError, match="duplicate process set"):
            hvd.add_process_set(range(size))  # the global set's ranks
        assert sorted(registry(hvd)) == [0, rest.process_set_id]
    finally:
        hvd.remove_process_set(rest)


def test_an_id_that_names_no_set_is_a_value_error(hvd, fw):
    fake = hvd.ProcessSet([0])
    fake.process_set_id = 10
    with pytest.raises(ValueError, match="Process set 10 is unknown"):
        hvd.allreduce(fw.tensor([1.0]), process_set=fake)


def test_str_names_the_communicator(hvd):
    assert str(hvd.global_process_set) == \
        "ProcessSet(process_set_id=0, ranks=%s, mpi_comm=None)" % list(range(hvd.size()))


def test_init_refuses_duplicate_sets_and_can_be_called_again(hvd):
    size = hvd.size()
    hvd.shutdown()
    try:
        twice = [hvd.ProcessSet([0]), hvd.ProcessSet([0])]
        with pytest.raises(ValueError, match="entry number 1 is a duplicate"):
            hvd.init(process_sets=twice)
        assert not hvd.is_initialized() and twice[1].process_set_id is None
        everyone = [hvd.ProcessSet([0]), hvd.ProcessSet(range(size - 1, -1, -1))]
        with pytest.raises(ValueError, match="entry number 1 is a duplicate"):
            hvd.init(process_sets=everyone)
        assert not hvd.is_initialized()
        sets = [hvd.ProcessSet([0]), hvd.ProcessSet(range(1, size))]
        hvd.init(process_sets=sets)
        assert [s.process_set_id for s in sets] == [1, 2]
        assert registry(hvd) == {0: list(range(size)), 1: [0], 2: list(range(1, size))}
    finally:
        hvd.shutdown()
        hvd.init()
