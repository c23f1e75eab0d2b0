"""The only writes fusiongen makes (staging, atomic publish) and the comparison `check` makes instead."""
