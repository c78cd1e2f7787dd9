"""What a run shows of itself: progress lines, TensorBoard scalars and summaries, training
curves, the diagnostics tree rqt_robot_monitor shows, and a process' heartbeat file.
"""
