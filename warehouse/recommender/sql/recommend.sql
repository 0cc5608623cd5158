-- Recommender macros: the candidate set of `gpuledger recommend`, in SQL.
--
-- Installed by warehouse.recommender.macros.install_macros(con), after the freshness macros
-- (provider_freshness, fresh_providers) of warehouse/freshness.py: TEMP macros on the
-- connection that uses them. `gpuledger macros` prints the whole set for a DuckDB session
-- to `.read`. The Python recommender reads its per-offer facts through offer_facts and applies
-- fit_ok's rule over arrays (warehouse/recommender/ranking.py); the tests hold its candidates to
-- the rows of `fits`. See docs/recommender.md for the formulas behind vram_gb.

-- Seconds billed for one run of duration_s seconds: the run is raised to the
-- minimum charge, then rounded up to the billing increment. A missing
-- increment is taken as 3600 s (per-hour billing, the conservative case).
--   select billed_seconds(1200, 3600, 60)  -> 3600   (a 20-minute run billed per hour)
--   select billed_seconds(1200, 1, 60)     -> 1200   (per second, 60 s minimum)
--   select billed_seconds(30, 1, 60)       -> 60
-- A job of R runs pays the minimum once (runs back to back in one rental):
--   greatest(R * billed_seconds(d, g, 0), billed_seconds(0, g, m))
create or replace macro billed_seconds(duration_s, granularity_s, minimum_s) as
    ceil(round(greatest(duration_s, coalesce(minimum_s, 0)) / greatest(coalesce(granularity_s, 3600), 1), 9))
    * greatest(coalesce(granularity_s, 3600), 1);

-- True when a source's interconnect text claims NVSwitch or NVLink (incl. 'NVLink bridge').
-- A claim alone never sets a node's link speed: node_link checks it against the card.
create or replace macro is_fast_interconnect(interconnect) as
    coalesce(interconnect ilike 'nvswitch%' or interconnect ilike 'nvlink%', false);

-- What the card's GPU-to-GPU fabric reaches, from gpu_models: 'node' for modules that only exist
-- on a fabric baseboard (NVIDIA SXM and superchips on NVLink/NVSwitch, AMD OAM on Infinity Fabric,
-- Google TPU chips on ICI),
-- 'pairs' for PCIe cards joined by an optional NVLink bridge (A100/H100 PCIe, A40, RTX A6000,
-- RTX 3090), 'none' otherwise (GeForce RTX 4090/5090 have no NVLink; an SLI bridge is not NVLink).
create or replace macro card_fabric_reach(vendor, card_link, form_factor) as
    case when vendor = 'NVIDIA' and card_link ilike 'nvlink%'
              and (form_factor ilike 'sxm%' or form_factor = 'Superchip') then 'node'
         when vendor = 'AMD' and card_link ilike 'infinity fabric%' and form_factor = 'OAM' then 'node'
         when vendor = 'Google' and card_link ilike 'ici%' then 'node'
         when vendor = 'NVIDIA' and (card_link ilike 'bridge%' or card_link ilike 'nvlink%') then 'pairs'
         else 'none' end;

-- The host link's achieved GB/s per direction, by the card's PCIe generation (x16: 15.75, 31.5 and
-- 63 GB/s raw per direction, PCI-SIG; about 80 % achieved): Hopper, Blackwell and CDNA3/4 are
-- PCIe 5.0, Turing and older 3.0, the rest 4.0. Mirrors throughput.pcie_gbs.
create or replace macro pcie_gbs(architecture) as
    case when architecture in ('Hopper', 'Blackwell', 'Blackwell Ultra', 'CDNA3', 'CDNA4') then 50.0
         when architecture in ('Turing', 'Volta', 'Pascal', 'Maxwell', 'Kepler', 'Vega/GCN5') then 12.5
         else 25.0 end;

-- GB/s per direction between a node's GPUs, for the sharded and data-parallel time: the card's
-- fabric figure halved (datasheets give both directions) when it reaches the node (or a claimed
-- bridge joins exactly two cards), else the host's PCIe. Mirrors throughput.node_link.
create or replace macro node_link_gbs(interconnect, gpu_count, vendor, card_link, form_factor, architecture) as
    coalesce(case when gpu_count >= 2 and card_fabric_reach(vendor, card_link, form_factor) = 'node'
                       or (card_fabric_reach(vendor, card_link, form_factor) = 'pairs' and gpu_count = 2
                           and is_fast_interconnect(interconnect))
                  then try_cast(nullif(regexp_extract(card_link, '([0-9.]+)\s*GB/s', 1), '') as double) / 2 end,
             pcie_gbs(architecture));

-- Every current offer with what matching and costing derive from the
-- reference tables, whatever the request and the providers' freshness:
--   memory_gb_per_gpu  gpu_memory_gb as the source reports it (GiB), not the
--                      marketed figure; when a source gave none (or it is the
--                      canon's), the marketed figure in GiB, flagged memory_source = 'nominal'.
--                      NVIDIA's and AMD's HBM sizes are GiB: AWS reports H100 and A100 80GB as 81920
--                      MiB, H200 141GB as 144384, A100 40GB as 40960, V100 16GB as 16384, Lambda GH200
--                      96GB as 98304; DigitalOcean states MI300X's 192 in GiB (B200's 180 is 0.9 above the
--                      179.06 nvidia-smi shows, within the 5% headroom). Blackwell Ultra's 288 GB
--                      are not (sources report 262-270: AWS p6-b300, gpuhunt; Verda's B300 268), nor GDDR
--                      sizes (AWS: L40S 48 GB is 45776 MiB, L4 and A10G 24 GB 22888): both read as
--                      decimal GB (x 10^9 / 2^30), never more than the card gives
--   link_gbs, link_kind  node_link_gbs and what it is: 'NVLink', 'Infinity Fabric', 'ICI', 'NVLink
--                      bridge' or 'PCIe'; pcie_gbs the host link
--   link_note          why a claimed NVLink/NVSwitch was not counted (NULL otherwise)
--   gpu_bf16, gpu_architecture, gpu_segment  from gpu_models (precision_ok)
--   gpu_bf16_tflops, gpu_fp16_tflops, gpu_bandwidth_tbs, gpu_nvlink  from gpu_models (time model)
--   granularity_s, minimum_s, billing_source  the offer's billing increment
--                      and minimum charge, else the provider's, else per hour
-- `fits` builds on it.
create or replace macro offer_facts() as table
    select o.*,
           o.purchase_option <> 'on_demand' and o.term_months is null as interruptible,
           coalesce(if(o.gpu_memory_from_canon, null, o.gpu_memory_gb),
                    coalesce(o.gpu_memory_gb_nominal, g.memory_gb) * least(o.gpu_count, 1)
                    * if(g.vendor in ('NVIDIA', 'AMD') and g.memory_type ilike 'HBM%'
                         and g.architecture <> 'Blackwell Ultra', 1.0, 1e9 / 1073741824.0))
               as memory_gb_per_gpu,
           case when o.gpu_memory_gb is not null and not o.gpu_memory_from_canon then 'reported' else 'nominal' end
               as memory_source,
           node_link_gbs(o.interconnect, o.gpu_count, g.vendor, g.nvlink, g.form_factor, g.architecture) as link_gbs,
           case when node_link_gbs(o.interconnect, o.gpu_count, g.vendor, g.nvlink, g.form_factor, g.architecture)
                     <> pcie_gbs(g.architecture) or regexp_matches(coalesce(g.nvlink, ''), '[0-9.]+\s*GB/s')
                     and card_fabric_reach(g.vendor, g.nvlink, g.form_factor) = 'node' and o.gpu_count >= 2
                then case when card_fabric_reach(g.vendor, g.nvlink, g.form_factor) = 'pairs' then 'NVLink bridge'
                          when g.vendor = 'AMD' then 'Infinity Fabric' when g.vendor = 'Google' then 'ICI'
                          else 'NVLink' end
                else 'PCIe' end as link_kind,
           pcie_gbs(g.architecture) as pcie_gbs,
           p.kind as provider_kind,
           case when o.gpu_count > 1 and is_fast_interconnect(o.interconnect)
                     and card_fabric_reach(g.vendor, g.nvlink, g.form_factor) <> 'node'
                     and not (card_fabric_reach(g.vendor, g.nvlink, g.form_factor) = 'pairs' and o.gpu_count = 2)
                then 'the source says ' || o.interconnect || '; ' || o.gpu_model ||
                     case card_fabric_reach(g.vendor, g.nvlink, g.form_factor)
                         when 'pairs' then ' joins only pairs by an NVLink bridge: counted as PCIe between pairs'
                         else ' has no NVLink: counted as PCIe' end
           end as link_note,
           g.bf16 as gpu_bf16,
           g.bf16_dense_tflops as gpu_bf16_tflops,
           g.fp16_dense_tflops as gpu_fp16_tflops,
           g.memory_bandwidth_tbs as gpu_bandwidth_tbs,
           g.nvlink as gpu_nvlink,
           g.form_factor as gpu_form_factor,
           g.architecture as gpu_architecture,
           g.segment as gpu_segment,
           coalesce(o.billing_granularity_s, p.billing_granularity_s, 3600) as granularity_s,
           coalesce(o.minimum_charge_s, p.minimum_charge_s, 0) as minimum_s,
           case when o.billing_granularity_s is not null then 'offer'
                when p.billing_granularity_s is not null then 'provider'
                else 'assumed' end as billing_source
    from offers o
    left join providers p on p.provider = o.provider
    left join gpu_models g on g.gpu_model = o.gpu_model;

-- Interruptions per hour from offers.interruption_rate_max_pct, the published monthly rate band of
-- the one risk scale (AWS Spot Advisor buckets, Azure eviction rates: the share of instances
-- interrupted over a month, at the band's midpoint, as a constant hazard -ln(1 - p) / 730 h);
-- NULL when the source publishes no rate (unknown, never zero). Mirrors
-- warehouse.recommender.spot.interruption_rate_per_hour.
create or replace macro interruption_rate(band_max_pct) as
    -ln(1 - case band_max_pct
                 when 5 then 0.025 when 10 then 0.075 when 15 then 0.125
                 when 20 then 0.175 when 100 then 0.25 end) / 730.0;

-- True for a storage class that can hold a training job's working set between runs: a
-- persistent block volume or file system. Cold HDD (AWS sc1/st1/standard magnetic, GCP
-- pd-standard, Azure HDD, hyperdisk-throughput), archive, cold and object tiers cannot boot or
-- serve a working set; local/instance/container disks vanish with the machine; hyperdisk-ml is
-- read-only.
create or replace macro working_volume_ok(storage_class) as
    not (lower(storage_class) in ('sc1', 'st1', 'standard', 'pd-standard', 'pd-standard-regional',
                                  'hyperdisk-throughput', 'hyperdisk-ml', 'local-ssd', 'instance-storage',
                                  'container-disk')
         or regexp_matches(lower(storage_class), 'hdd|archive|cold|glacier|nearline|object|blob'));

-- GiB billed for a volume that must hold need_gb, by its class's published sizing rule
-- (warehouse/data/storage_volume_sizes.csv): at least min_gb, then the smallest of tiers_gb that
-- holds it (past the largest tier, whole disks of the largest size), else rounded up to
-- increment_gb (0: any size). A NULL min_gb (no published rule) bills the size needed.
-- Mirrors warehouse.recommender.volumes.billed_volume_gb.
create or replace macro billed_volume_gb(need_gb, min_gb, increment_gb, tiers_gb) as
    case when min_gb is null then need_gb
         when len(coalesce(tiers_gb, [])) > 0
              then coalesce(list_min(list_filter(tiers_gb, lambda t: t >= greatest(need_gb, min_gb))),
                            ceil(greatest(need_gb, min_gb) / list_max(tiers_gb)) * list_max(tiers_gb))
         when coalesce(increment_gb, 0) > 0
              then ceil(greatest(need_gb, min_gb) / increment_gb) * increment_gb
         else greatest(need_gb, min_gb) end;

-- True when a GPU has a fast path for training in train_precision
-- ('bf16' | 'fp16' | 'fp32', any case): BF16 needs the hardware type (Ampere and later),
-- FP16 tensor cores start with Volta; FP32 runs everywhere. NULL for a precision it does not know.
create or replace macro precision_ok(train_precision, gpu_bf16, gpu_architecture) as
    case lower(trim(train_precision))
        when 'bf16' then coalesce(gpu_bf16, false)
        when 'fp16' then coalesce(gpu_architecture not in ('Kepler', 'Maxwell', 'Pascal'), false)
        when 'fp32' then true
    end;

-- The definition of "fits", used by `fits` (warehouse/recommender/ranking.py mirrors it): an
-- offer fits a plan needing vram_gb GiB on each GPU when its usable memory
-- (memory_gb_per_gpu x (1 - headroom)) is at least vram_gb, and
--   gpus 1, nodes 1  the whole job on one GPU (or one slice: fractional gpu_count, whose memory
--                    is the slice), copied data-parallel onto every whole GPU of the node
--   gpus n > 1       sharded over exactly n GPUs: gpu_count * nodes = n, whole GPUs only, and an
--                    RDMA fabric (multinode_fabric) when nodes > 1; any link between the node's
--                    GPUs, whose speed the time model charges (node_link_gbs)
-- Never NULL: an offer without a memory figure does not fit.
create or replace macro fit_ok(memory_gb_per_gpu, gpu_count, multinode_fabric, vram_gb, gpus, nodes, headroom) as
    coalesce(memory_gb_per_gpu * (1 - headroom) >= vram_gb
             and case when gpus <= 1 and nodes <= 1 then true
                      else gpu_count >= 1 and gpu_count * nodes = gpus
                           and (nodes = 1 or multinode_fabric is not null)
                 end, false);

-- Current offers that fit a job needing vram_gb GiB on each GPU: offers of
-- fresh providers (fresh_providers) that fit_ok the plan, on-demand unless spot.
--
--   vram_gb        memory the job needs per GPU, GiB (warehouse.recommender.memory: per_gpu.total_gb)
--   gpus, nodes    the plan: 1 GPU, or sharded over exactly `gpus` GPUs on `nodes` machines
--                  (nodes > 1 needs an RDMA fabric: multinode_fabric)
--   spot           false: on-demand only; true: spot / low_priority / interruptible
--                  too, flagged by the `interruptible` column, never unmarked
--   commitments    false: no commitment; true: 1- and 3-year commitments too (term_months,
--                  payment_option set; price_per_hour is their effective hourly rate)
--   include_unavailable  false: offers the source reports without capacity
--                  (available = false) are left out; true: kept (the column says so)
--   max_age_hours  freshness limit on the provider's last successful scrape (NULL: the
--                  default, warehouse.freshness.DEFAULT_MAX_AGE_HOURS)
--   headroom       fraction of each GPU's memory left free (allocator
--                  fragmentation, driver reservations): usable = memory * (1 - headroom)
--   train_precision 'bf16' | 'fp16' | 'fp32': sets precision_supported (precision_ok)
--   as_of          the time freshness is judged at (default now())
--
-- Columns: those of offer_facts, plus provider_last_ok, precision_supported,
-- usable_gb_per_gpu, need_gb_per_gpu, plan ('single': one GPU or a slice; 'data-parallel': a
-- copy on each whole GPU of the node; 'sharded'), gpus_used (the GPUs the job uses), nodes and
-- plan_price_per_hour.
--
--   select provider, instance_type, region, purchase_option, price_per_hour, usable_gb_per_gpu
--   from fits(46.2, spot := true) where region like 'us-%' order by price_per_hour limit 10;
--   select * from fits(131.5, gpus := 8);        -- 70B full fine-tune, ZeRO-3 over 8 GPUs
create or replace macro fits(vram_gb, gpus := 1, spot := false, max_age_hours := NULL, headroom := 0.05,
                             train_precision := 'bf16', nodes := 1, as_of := NULL, commitments := false,
                             include_unavailable := false) as table
    select o.*,
           f.last_ok as provider_last_ok,
           precision_ok(train_precision, o.gpu_bf16, o.gpu_architecture) as precision_supported,
           o.memory_gb_per_gpu * (1 - headroom) as usable_gb_per_gpu,
           vram_gb as need_gb_per_gpu,
           case when gpus > 1 or nodes > 1 then 'sharded' when o.gpu_count >= 2 then 'data-parallel'
                else 'single' end as plan,
           case when gpus > 1 or nodes > 1 then gpus when o.gpu_count >= 1 then floor(o.gpu_count)
                else o.gpu_count end as gpus_used,
           nodes as nodes,
           o.price_per_hour * nodes as plan_price_per_hour
    from offer_facts() o
    join fresh_providers(max_age_hours := max_age_hours, as_of := as_of) f on f.provider = o.provider
    -- A commitment (term_months set) is a 1- or 3-year contract, not a way to rent for one job:
    -- only `commitments := true` lets it in.
    where (o.term_months is null and (spot or o.purchase_option = 'on_demand') or (commitments and o.term_months is not null))
      and (include_unavailable or coalesce(o.available, true))
      and fit_ok(o.memory_gb_per_gpu, o.gpu_count, o.multinode_fabric, vram_gb, gpus, nodes, headroom);
