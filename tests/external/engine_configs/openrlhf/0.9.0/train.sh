deepspeed --module openrlhf.cli.train_ppo_ray \
   --advantage_estimator group_norm \
   --eps_clip_low_high 0.2 0.28 \
   --n_samples_per_prompt 8 \
   --dynamic_filtering \
   --dynamic_filtering_reward_range 0 1
