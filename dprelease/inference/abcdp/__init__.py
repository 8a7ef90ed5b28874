"""ABCDP (Park et al., Park et al. 2021): DP rejection ABC by the sparse vector technique."""
