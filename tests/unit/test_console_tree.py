"""``gangsched status`` draws the queue tree: each queue under its parent, invalid ones apart."""

from __future__ import annotations

from rich.console import Console

from gangsched.console import QueueRow, print_status, tree_order
from gangsched.core.model.objects import QueueName, QueueSpec
from gangsched.core.queues.hierarchy import build_tree


def spec(name: str, parent: str | None = None) -> QueueSpec:
    return QueueSpec(QueueName(name), parent=QueueName(parent) if parent else None)


def test_the_status_table_draws_each_queue_under_its_parent() -> None:
    tree = build_tree({s.name: s for s in (
        spec("org"), spec("t2", "org"), spec("t1", "org"), spec("a", "t1"), spec("b", "t1"),
        spec("c", "t2"), spec("lost", "gone"), spec("default"))})
    order = tree_order(tree)
    assert order == ["default", "org", "t1", "a", "b", "t2", "c", "lost"]
    rows = [QueueRow(queue=name, weight=1, state="Open", capability=None, allocated={},
                     pending=0, running=0, depth=len(tree.path(name)) - 1,
                     invalid="queue 'lost' is invalid" if name in tree.invalid else "")
            for name in order]
    console = Console(record=True, width=160)
    print_status(console, rows, [])
    text = console.export_text()
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "QUEUE" in line) + 2
    drawn = [line[2:12].rstrip() for line in lines[start:start + 8]]
    assert drawn == ["default", "org", "├─ t1", "│  ├─ a", "│  └─ b", "└─ t2", "   └─ c",
                     "lost"]
    assert "queue lost: queue 'lost' is invalid" in text
