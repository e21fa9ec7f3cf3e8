"""The server's Ray-placed processes from Ray's state: both of Ray's interfaces read into one view, the server's jobs told by their driver in its tree, roles by actor class, model workers ranked in vLLM's order."""

from __future__ import annotations

from infer_prof.profiler.session.target.ray_processes import (
    GCS_TABLES,
    STATE_API,
    ClusterView,
    RayActor,
    RayDriver,
    RayNode,
    from_gcs,
    from_state_api,
    role_of,
    server_actors,
)

HEAD, SECOND = "aa" * 28, "bb" * 28


def view(*actors: RayActor, drivers: tuple[RayDriver, ...] = ()) -> ClusterView:
    nodes = [RayNode(HEAD, "10.0.0.1", True, True), RayNode(SECOND, "10.0.0.2", False, True)]
    return ClusterView(nodes, list(actors), list(drivers), STATE_API)


def actor(name: str, node: str, pid: int, job: str = "01000000", state: str = "ALIVE") -> RayActor:
    return RayActor(f"{name}-{pid}", name, job, node, pid, state)


def test_roles_come_from_the_actor_class() -> None:
    assert role_of("RayWorkerWrapper") == ("model worker", "Ray actor class RayWorkerWrapper")
    assert role_of("ServeReplica:app:Model")[0] == "Serve replica"
    role, why = role_of("TokenCounter")
    assert role == "Ray actor (TokenCounter)" and "no rule names it" in why


def test_the_server_s_actors_are_those_of_the_job_whose_driver_is_in_its_tree() -> None:
    cluster = view(
        actor("RayWorkerWrapper", SECOND, 300),
        actor("RayWorkerWrapper", HEAD, 200),
        actor("RayWorkerWrapper", HEAD, 100, state="DEAD"),  # a worker gone before the run
        actor("Other", HEAD, 400, job="02000000"),  # another job's actor on the same cluster
        drivers=(
            RayDriver("01000000", "10.0.0.1", 42, True),
            RayDriver("02000000", "10.0.0.1", 77, True),
        ),
    )
    found = server_actors(cluster, tree_pids=[41, 42], local_ips=["10.0.0.1"], own_job="03000000")
    assert found.jobs == ["01000000"] and not found.notes
    by_pid = {process.pid: process for process in found.processes}
    assert set(by_pid) == {200, 300}
    # vLLM's order: the driver's node first, so the head's worker is rank 0 and the second node's rank 1
    assert (by_pid[200].rank, by_pid[200].role) == (0, "model worker rank 0")
    assert (by_pid[300].rank, by_pid[300].node_ip) == (1, "10.0.0.2")
    assert by_pid[300].key == f"{SECOND[:8]}:300" and "inferred" in by_pid[300].role_source


def test_a_driver_pid_on_another_machine_is_not_the_server_s() -> None:
    cluster = view(
        actor("RayWorkerWrapper", HEAD, 200), drivers=(RayDriver("01000000", "10.9.9.9", 42, True),)
    )
    found = server_actors(cluster, tree_pids=[42], local_ips=["10.0.0.1"], own_job=None)
    assert found.jobs == [] and "no process of the server's tree is a Ray driver" in found.notes[0]


def test_with_no_driver_in_the_tree_every_live_actor_but_ours_is_listed_and_said_so() -> None:
    cluster = view(
        actor("RayWorkerWrapper", SECOND, 300),
        actor("NodeAgent", SECOND, 301, job="09000000"),  # infer-prof's own sampling agent
    )
    found = server_actors(cluster, tree_pids=[5], local_ips=["10.0.0.1"], own_job="09000000")
    assert [process.pid for process in found.processes] == [300]
    assert "every live actor of the cluster is listed (1, of jobs 01000000)" in found.notes[0]


def test_workers_of_one_node_are_ranked_by_pid_and_fuller_nodes_come_later() -> None:
    cluster = view(
        actor("RayWorkerWrapper", SECOND, 900),
        actor("RayWorkerWrapper", SECOND, 800),
        actor("RayWorkerWrapper", HEAD, 700),
        drivers=(RayDriver("01000000", "10.0.0.1", 1, True),),
    )
    found = server_actors(cluster, tree_pids=[1], local_ips=[], own_job=None)
    assert [(process.pid, process.rank) for process in found.processes if process.rank is not None] == [
        (900, 2),
        (800, 1),
        (700, 0),
    ]


def test_on_one_host_the_head_s_worker_is_rank_0_whatever_its_pid() -> None:
    # Two nodes on one IP (ray.cluster_utils.Cluster): Ray connects the driver to the head, where vLLM puts rank 0;
    # the pids say only which raylet started its worker first, which two raylets race for.
    one_ip = [RayNode(HEAD, "10.0.0.1", True, True), RayNode(SECOND, "10.0.0.1", False, True)]
    workers = [actor("RayWorkerWrapper", SECOND, 500), actor("RayWorkerWrapper", HEAD, 600)]
    cluster = ClusterView(one_ip, workers, [RayDriver("01000000", "10.0.0.1", 1, True)], STATE_API)
    found = server_actors(cluster, tree_pids=[1], local_ips=[], own_job=None)
    assert sorted((process.rank, process.node_id) for process in found.processes) == [(0, HEAD), (1, SECOND)]


def test_both_of_ray_s_interfaces_read_into_one_view() -> None:
    state = from_state_api(
        nodes=[{"node_id": HEAD, "node_ip": "10.0.0.1", "is_head_node": True, "state": "ALIVE"}],
        actors=[
            {
                "actor_id": "a1",
                "class_name": "RayWorkerWrapper",
                "job_id": "01000000",
                "node_id": HEAD,
                "pid": 200,
                "state": "ALIVE",
            }
        ],
        workers=[
            {"worker_type": "DRIVER", "job_id": "01000000", "ip": "10.0.0.1", "pid": 42, "is_alive": True},
            {"worker_type": "WORKER", "job_id": "01000000", "ip": "10.0.0.1", "pid": 200, "is_alive": True},
        ],
    )
    gcs = from_gcs(
        nodes=[
            {
                "NodeID": HEAD,
                "NodeManagerAddress": "10.0.0.1",
                "Alive": True,
                "Resources": {"node:__internal_head__": 1.0},
            }
        ],
        actors={
            "a1": {
                "ActorID": "a1",
                "ActorClassName": "RayWorkerWrapper",
                "JobID": "01000000",
                "Address": {"NodeID": HEAD},
                "Pid": 200,
                "State": "ALIVE",
            }
        },
        jobs=[{"JobID": "01000000", "DriverIPAddress": "10.0.0.1", "DriverPid": 42, "IsDead": False}],
    )
    assert (state.source, gcs.source) == (STATE_API, GCS_TABLES)
    for one in (state, gcs):
        assert one.nodes == [RayNode(HEAD, "10.0.0.1", True, True)]
        assert one.actors == [RayActor("a1", "RayWorkerWrapper", "01000000", HEAD, 200, "ALIVE")]
        assert one.drivers == [RayDriver("01000000", "10.0.0.1", 42, True)]


def test_ray_workers_under_the_server_s_own_tree_are_named_by_their_title() -> None:
    from infer_prof.profiler.session.target.tree import ProcessInfo, assign_role

    cases = {
        ("ray::RayWorkerW", "ray::RayWorkerWrapper.execute_method"): "model worker",
        ("ray::IDLE", "ray::IDLE"): "idle helper (idle Ray worker)",
        ("ray::TokenCount", "ray::TokenCounter"): "Ray worker",
        ("python3", "python3 -m other.ray::thing"): "unknown",  # only a title that starts with it
    }
    for (title, cmdline), role in cases.items():
        process = ProcessInfo(pid=10, ppid=1, title=title, cmdline=cmdline, python=True)
        assign_role(process)
        assert process.role == role, (title, process.role_source)
