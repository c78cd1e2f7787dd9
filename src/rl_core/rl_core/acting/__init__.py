"""The robot side of a run in plain Python: when a robot may act, a simulator's stepping, what a
policy acts with and which weights it loads, central batched inference, scripted experts,
operator interventions, remote environments and the robot-side image encoder.
"""
