from fedevo.searching.runner import Task, longest_first


def test_longest_first_orders_by_cost_then_id():
    tasks = [Task(i, 1, i, {}, 0, cost) for i, cost in enumerate([1.0, 5.0, 0.0, 5.0, 2.0])]
    assert [t.id for t in longest_first(tasks)] == [1, 3, 4, 0, 2]
