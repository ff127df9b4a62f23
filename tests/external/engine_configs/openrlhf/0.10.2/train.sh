deepspeed --module openrlhf.cli.train_ppo_ray \
   --algo.advantage.estimator group_norm \
   --actor.eps_clip_low_high 0.2 0.28 \
   --rollout.n_samples_per_prompt 8 \
   --algo.dynamic_filtering_enable \
   --algo.dynamic_filtering_range 0 1
