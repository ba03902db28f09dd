//! The rows of NVIDIA's Xid catalog, one per XID (1 to 162): mnemonic,
//! short name, class and the catalog's immediate action.  Data only; the
//! rules built from them are in [`crate::catalog`].

/// What part of the system an XID points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// The application's own fault.
    Application,
    /// The driver or the GPU's firmware.
    Driver,
    /// GPU memory (ECC, remapping, retirement).
    Memory,
    /// The PCIe or C2C bus.
    Bus,
    /// NVLink.
    Nvlink,
    /// Temperature or power.
    ThermalPower,
    /// The GPU System Processor.
    Gsp,
    /// Display, video, reserved.
    Other,
}

/// The catalog's "Resolution Bucket (Immediate Action)".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket {
    /// `RESTART_APP`.
    RestartApp,
    /// `IGNORE`.
    Ignore,
    /// `RESET_GPU`.
    ResetGpu,
    /// `RESTART_BM`: restart the bare-metal node.
    RestartBm,
    /// `UNEXPECTED_ERR_REPORT_ISSUE` / `CONTACT_SUPPORT`.
    ReportIssue,
    /// `WORKFLOW_XID_45`: alone, restart the fabric manager; after other
    /// XIDs, ignore (follow the other XID).
    WorkflowXid45,
    /// `WORKFLOW_XID_48`: a double-bit ECC error; reset the GPU, check
    /// remapping.
    WorkflowXid48,
    /// `WORKFLOW_NVLINK_ERR` / `WORKFLOW_NVLINK5_ERR`: decode the link
    /// registers; a reset clears most.
    WorkflowNvlink,
    /// `CHECK_MECHANICALS`: power cabling.
    CheckMechanicals,
    /// `UPDATE_SWFW`: update software or firmware.
    UpdateSwfw,
    /// `RESTART_VM`.
    RestartVm,
    /// `CHECK_UVM`.
    CheckUvm,
    /// XID 154: "follow guidance as it applies to another Xid".
    FollowOther,
}

/// One XID's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XidEntry {
    /// The number.
    pub code: u32,
    /// The driver's mnemonic (`ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS`).
    pub mnemonic: &'static str,
    /// The short name reasons show.
    pub name: &'static str,
    /// What part it points at.
    pub class: Class,
    /// The catalog's immediate action.
    pub bucket: Bucket,
}

const fn e(code: u32, mnemonic: &'static str, name: &'static str, class: Class, bucket: Bucket) -> XidEntry {
    XidEntry { code, mnemonic, name, class, bucket }
}

use Bucket::*;
use Class::*;

/// Every XID in NVIDIA's catalog (1 to 162), in order.
pub static XIDS: &[XidEntry] = &[
    e(1, "ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD", "fifo method error", Driver, ReportIssue),
    e(2, "ROBUST_CHANNEL_FIFO_ERROR_SW_METHOD", "fifo sw method error", Driver, ReportIssue),
    e(3, "ROBUST_CHANNEL_FIFO_ERROR_UNK_METHOD", "fifo unknown method", Driver, ReportIssue),
    e(4, "ROBUST_CHANNEL_FIFO_ERROR_CHANNEL_BUSY", "fifo channel busy", Driver, ReportIssue),
    e(5, "ROBUST_CHANNEL_FIFO_ERROR_RUNOUT_OVERFLOW", "fifo runout overflow", Driver, ReportIssue),
    e(6, "ROBUST_CHANNEL_FIFO_ERROR_PARSE_ERR", "push buffer parse error", Driver, ReportIssue),
    e(7, "ROBUST_CHANNEL_FIFO_ERROR_PTE_ERR", "push buffer pte error", Driver, ReportIssue),
    e(8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "gpu stopped processing", Application, RestartApp),
    e(9, "ROBUST_CHANNEL_GR_ERROR_INSTANCE", "gr instance error", Driver, ReportIssue),
    e(10, "ROBUST_CHANNEL_GR_ERROR_SINGLE_STEP", "gr single step", Driver, ReportIssue),
    e(11, "ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "corrupted push buffer stream", Application, RestartApp),
    e(12, "ROBUST_CHANNEL_GR_ERROR_SW_METHOD", "gr sw method error", Driver, ReportIssue),
    e(13, "ROBUST_CHANNEL_GR_EXCEPTION", "graphics engine exception", Application, RestartApp),
    e(14, "ROBUST_CHANNEL_FAKE_ERROR", "fake error", Other, Ignore),
    e(15, "ROBUST_CHANNEL_SCANLINE_TIMEOUT", "scanline timeout", Other, ReportIssue),
    e(16, "ROBUST_CHANNEL_VBLANK_CALLBACK_TIMEOUT", "display engine hung", Other, ReportIssue),
    e(17, "ROBUST_CHANNEL_PARAMETER_ERROR", "parameter error", Driver, ReportIssue),
    e(18, "ROBUST_CHANNEL_BUS_MASTER_TIMEOUT_ERROR", "bus mastering disabled", Bus, ReportIssue),
    e(19, "ROBUST_CHANNEL_DISP_MISSED_NOTIFIER", "display engine error", Other, ReportIssue),
    e(20, "ROBUST_CHANNEL_MPEG_ERROR_SW_METHOD", "mpeg push buffer error", Other, ReportIssue),
    e(21, "ROBUST_CHANNEL_ME_ERROR_SW_METHOD", "motion estimation error", Other, ReportIssue),
    e(22, "ROBUST_CHANNEL_VP_ERROR_SW_METHOD", "video processor push buffer", Other, ReportIssue),
    e(23, "ROBUST_CHANNEL_RC_LOGGING_ENABLED", "rc logging enabled", Driver, ReportIssue),
    e(24, "ROBUST_CHANNEL_GR_SEMAPHORE_TIMEOUT", "gpu semaphore timeout", Driver, ReportIssue),
    e(25, "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "illegal push buffer stream", Application, RestartApp),
    e(26, "ROBUST_CHANNEL_FIFO_ERROR_FBISTATE_TIMEOUT", "framebuffer timeout", Memory, ReportIssue),
    e(27, "ROBUST_CHANNEL_VP_ERROR", "video processor exception", Other, ReportIssue),
    e(28, "ROBUST_CHANNEL_VP2_ERROR", "video processor exception", Other, ReportIssue),
    e(29, "ROBUST_CHANNEL_BSP_ERROR", "video processor exception", Other, ReportIssue),
    e(30, "ROBUST_CHANNEL_BAD_ADDR_ACCESS", "gpu semaphore access error", Driver, ReportIssue),
    e(31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "memory page fault", Application, RestartApp),
    e(32, "ROBUST_CHANNEL_PBDMA_ERROR", "corrupted push buffer stream", Application, RestartApp),
    e(33, "ROBUST_CHANNEL_SEC_ERROR", "micro-controller error", Driver, ReportIssue),
    e(34, "ROBUST_CHANNEL_MSVLD_ERROR", "video processor exception", Other, ReportIssue),
    e(35, "ROBUST_CHANNEL_MSPDEC_ERROR", "video processor exception", Other, ReportIssue),
    e(36, "ROBUST_CHANNEL_MSPPP_ERROR", "video processor exception", Other, ReportIssue),
    e(37, "ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", "driver firmware error", Driver, Ignore),
    e(38, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "driver firmware watchdog", Driver, Ignore),
    e(39, "ROBUST_CHANNEL_CE0_ERROR", "copy engine error", Application, RestartApp),
    e(40, "ROBUST_CHANNEL_CE1_ERROR", "copy engine error", Application, RestartApp),
    e(41, "ROBUST_CHANNEL_CE2_ERROR", "copy engine error", Application, RestartApp),
    e(42, "ROBUST_CHANNEL_VIC_ERROR", "video processor exception", Other, ReportIssue),
    e(43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "gpu stopped processing", Application, Ignore),
    e(44, "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "fault during context switch", Application, Ignore),
    e(45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "preemptive cleanup", Application, WorkflowXid45),
    e(46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "gpu stopped processing", Driver, ResetGpu),
    e(47, "ROBUST_CHANNEL_NVENC0_ERROR", "video processor exception", Other, ReportIssue),
    e(48, "ROBUST_CHANNEL_GPU_ECC_DBE", "double bit ecc error", Memory, WorkflowXid48),
    e(49, "SILENT_RUNNING_CONSTANT_LEVEL_SET_BY_REGISTRY", "silent running level", ThermalPower, ReportIssue),
    e(50, "SILENT_RUNNING_LEVEL_TRANSITION_DUE_TO_RC_ERROR", "silent running transition", ThermalPower, ReportIssue),
    e(51, "SILENT_RUNNING_STRESS_TEST_FAILURE", "silent running stress failure", ThermalPower, ReportIssue),
    e(52, "SILENT_RUNNING_LEVEL_TRANS_DUE_TO_TEMP_RISE", "silent running temperature", ThermalPower, ReportIssue),
    e(53, "SILENT_RUNNING_TEMP_REDUCED_CLOCKING", "temperature reduced clocks", ThermalPower, ReportIssue),
    e(54, "SILENT_RUNNING_PWR_REDUCED_CLOCKING", "aux power not connected", ThermalPower, CheckMechanicals),
    e(55, "SILENT_RUNNING_TEMPERATURE_READ_ERROR", "temperature read error", ThermalPower, ReportIssue),
    e(56, "DISPLAY_CHANNEL_EXCEPTION", "display engine error", Other, ReportIssue),
    e(57, "FB_LINK_TRAINING_FAILURE_ERROR", "video memory interface error", Memory, ReportIssue),
    e(58, "FB_MEMORY_ERROR", "unstable video memory interface", Memory, ReportIssue),
    e(59, "PMU_ERROR", "micro-controller error", Driver, ReportIssue),
    e(60, "ROBUST_CHANNEL_SEC2_ERROR", "video processor exception", Application, RestartApp),
    e(61, "PMU_BREAKPOINT", "micro-controller breakpoint", Driver, ReportIssue),
    e(62, "PMU_HALT_ERROR", "micro-controller halt", Driver, ResetGpu),
    e(63, "INFOROM_DRAM_RETIREMENT_EVENT", "row remap or page retirement recorded", Memory, Ignore),
    e(64, "INFOROM_DRAM_RETIREMENT_FAILURE", "row remap or page retirement failed", Memory, ResetGpu),
    e(65, "ROBUST_CHANNEL_NVENC1_ERROR", "video processor exception", Other, ReportIssue),
    e(66, "ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", "illegal access by driver", Driver, Ignore),
    e(67, "ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "illegal access by driver", Driver, Ignore),
    e(68, "ROBUST_CHANNEL_NVDEC0_ERROR", "video decoder exception", Application, RestartApp),
    e(69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "graphics engine class error", Application, RestartApp),
    e(70, "ROBUST_CHANNEL_CE3_ERROR", "copy engine error", Application, RestartApp),
    e(71, "ROBUST_CHANNEL_CE4_ERROR", "copy engine error", Application, RestartApp),
    e(72, "ROBUST_CHANNEL_CE5_ERROR", "copy engine error", Application, RestartApp),
    e(73, "ROBUST_CHANNEL_NVENC2_ERROR", "video encoder error", Other, ReportIssue),
    e(74, "NVLINK_ERROR", "nvlink error", Nvlink, WorkflowNvlink),
    e(75, "ROBUST_CHANNEL_CE6_ERROR", "copy engine error", Application, RestartApp),
    e(76, "ROBUST_CHANNEL_CE7_ERROR", "copy engine error", Application, RestartApp),
    e(77, "ROBUST_CHANNEL_CE8_ERROR", "copy engine error", Application, RestartApp),
    e(78, "VGPU_START_ERROR", "vgpu start error", Driver, UpdateSwfw),
    e(79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "fallen off the bus", Bus, RestartBm),
    e(80, "PBDMA_PUSHBUFFER_CRC_MISMATCH", "corrupted data sent to gpu", Application, RestartApp),
    e(81, "ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR", "vga subsystem error", Other, ReportIssue),
    e(82, "ROBUST_CHANNEL_NVJPG0_ERROR", "jpeg engine error", Application, RestartApp),
    e(83, "ROBUST_CHANNEL_NVDEC1_ERROR", "video decoder error", Application, RestartApp),
    e(84, "ROBUST_CHANNEL_NVDEC2_ERROR", "video decoder error", Application, RestartApp),
    e(85, "ROBUST_CHANNEL_CE9_ERROR", "copy engine error", Application, RestartApp),
    e(86, "ROBUST_CHANNEL_OFA0_ERROR", "optical flow engine error", Application, RestartApp),
    e(87, "NVTELEMETRY_DRIVER_REPORT", "driver telemetry report", Driver, ReportIssue),
    e(88, "ROBUST_CHANNEL_NVDEC3_ERROR", "video decoder error", Application, RestartApp),
    e(89, "ROBUST_CHANNEL_NVDEC4_ERROR", "video decoder error", Application, RestartApp),
    e(90, "LTC_ERROR", "l2 cache error", Memory, ReportIssue),
    e(91, "RESERVED_XID", "reserved", Other, ReportIssue),
    e(92, "EXCESSIVE_SBE_INTERRUPTS", "high single-bit ecc rate", Memory, Ignore),
    e(93, "INFOROM_ERASE_LIMIT_EXCEEDED", "inforom wear limit", Other, Ignore),
    e(94, "ROBUST_CHANNEL_CONTAINED_ERROR", "contained ecc error", Memory, RestartApp),
    e(95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "uncontained ecc error", Memory, ResetGpu),
    e(96, "ROBUST_CHANNEL_NVDEC5_ERROR", "video decoder error", Application, RestartApp),
    e(97, "ROBUST_CHANNEL_NVDEC6_ERROR", "video decoder error", Application, RestartApp),
    e(98, "ROBUST_CHANNEL_NVDEC7_ERROR", "video decoder error", Application, RestartApp),
    e(99, "ROBUST_CHANNEL_NVJPG1_ERROR", "jpeg engine error", Application, RestartApp),
    e(100, "ROBUST_CHANNEL_NVJPG2_ERROR", "jpeg engine error", Application, RestartApp),
    e(101, "ROBUST_CHANNEL_NVJPG3_ERROR", "jpeg engine error", Application, RestartApp),
    e(102, "ROBUST_CHANNEL_NVJPG4_ERROR", "jpeg engine error", Application, RestartApp),
    e(103, "ROBUST_CHANNEL_NVJPG5_ERROR", "jpeg engine error", Application, RestartApp),
    e(104, "ROBUST_CHANNEL_NVJPG6_ERROR", "jpeg engine error", Application, RestartApp),
    e(105, "ROBUST_CHANNEL_NVJPG7_ERROR", "jpeg engine error", Application, RestartApp),
    e(106, "SMBPBI_TEST_MESSAGE", "smbpbi test message", Other, Ignore),
    e(107, "SMBPBI_TEST_MESSAGE_SILENT", "smbpbi test message", Other, Ignore),
    e(108, "DESTINATION_FLA_TRANSLATION_ERROR", "fla translation error", Nvlink, ReportIssue),
    e(109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "context switch timeout", Application, ResetGpu),
    e(110, "SEC_FAULT_ERROR", "security fault", Driver, ResetGpu),
    e(111, "BUNDLE_ERROR_EVENT", "display bundle error", Other, ReportIssue),
    e(112, "DISP_SUPERVISOR_ERROR", "display supervisor error", Other, ReportIssue),
    e(113, "DP_LT_FAILURE", "dp link training error", Other, ReportIssue),
    e(114, "HEAD_RG_UNDERFLOW", "display pipeline underflow", Other, ReportIssue),
    e(115, "CORE_CHANNEL_REGS", "display core channel error", Other, ReportIssue),
    e(116, "WINDOW_CHANNEL_REGS", "display window channel error", Other, ReportIssue),
    e(117, "CURSOR_CHANNEL_REGS", "display cursor channel error", Other, ReportIssue),
    e(118, "HEAD_REGS", "display pixel pipeline error", Other, ReportIssue),
    e(119, "GSP_RPC_TIMEOUT", "gsp rpc timeout", Gsp, ResetGpu),
    e(120, "GSP_ERROR", "gsp error", Gsp, ResetGpu),
    e(121, "C2C_ERROR", "c2c link error", Bus, Ignore),
    e(122, "SPI_PMU_RPC_READ_FAIL", "spi pmu rpc read failure", Driver, ReportIssue),
    e(123, "SPI_PMU_RPC_WRITE_FAIL", "spi pmu rpc write failure", Driver, ReportIssue),
    e(124, "SPI_PMU_RPC_ERASE_FAIL", "spi pmu rpc erase failure", Driver, ReportIssue),
    e(125, "INFOROM_FS_ERROR", "inforom fs failure", Other, ReportIssue),
    e(126, "ROBUST_CHANNEL_CE10_ERROR", "copy engine error", Application, RestartApp),
    e(127, "ROBUST_CHANNEL_CE11_ERROR", "copy engine error", Application, RestartApp),
    e(128, "ROBUST_CHANNEL_CE12_ERROR", "copy engine error", Application, RestartApp),
    e(129, "ROBUST_CHANNEL_CE13_ERROR", "copy engine error", Application, RestartApp),
    e(130, "ROBUST_CHANNEL_CE14_ERROR", "copy engine error", Application, RestartApp),
    e(131, "ROBUST_CHANNEL_CE15_ERROR", "copy engine error", Application, RestartApp),
    e(132, "ROBUST_CHANNEL_CE16_ERROR", "copy engine error", Application, RestartApp),
    e(133, "ROBUST_CHANNEL_CE17_ERROR", "copy engine error", Application, RestartApp),
    e(134, "ROBUST_CHANNEL_CE18_ERROR", "copy engine error", Application, RestartApp),
    e(135, "ROBUST_CHANNEL_CE19_ERROR", "copy engine error", Application, RestartApp),
    e(136, "ALI_TRAINING_FAIL", "nvlink training failed", Nvlink, ResetGpu),
    e(137, "NVLINK_FLA_PRIV_ERR", "nvlink fla privilege error", Nvlink, Ignore),
    e(138, "ROBUST_CHANNEL_DLA_ERROR", "dla error", Other, ReportIssue),
    e(139, "ROBUST_CHANNEL_OFA1_ERROR", "optical flow engine error", Application, RestartApp),
    e(140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "unrecovered ecc error", Memory, ResetGpu),
    e(141, "ROBUST_CHANNEL_FAST_PATH_ERROR", "fast path error", Other, Ignore),
    e(142, "ROBUST_CHANNEL_NVENC3_ERROR", "video encoder error", Other, ReportIssue),
    e(143, "GPU_INIT_ERROR", "gpu init error", Driver, ResetGpu),
    e(144, "NVLINK_SAW_ERROR", "nvlink saw error", Nvlink, WorkflowNvlink),
    e(145, "NVLINK_RLW_ERROR", "nvlink rlw error", Nvlink, WorkflowNvlink),
    e(146, "NVLINK_TLW_ERROR", "nvlink tlw error", Nvlink, WorkflowNvlink),
    e(147, "NVLINK_TREX_ERROR", "nvlink trex error", Nvlink, WorkflowNvlink),
    e(148, "NVLINK_NVLPW_CTRL_ERROR", "nvlink nvlpw ctrl error", Nvlink, WorkflowNvlink),
    e(149, "NVLINK_NETIR_ERROR", "nvlink netir error", Nvlink, WorkflowNvlink),
    e(150, "NVLINK_MSE_ERROR", "nvlink mse error", Nvlink, WorkflowNvlink),
    e(151, "ROBUST_CHANNEL_KEY_ROTATION_ERROR", "key rotation error", Driver, RestartVm),
    e(152, "ROBUST_CHANNEL_DLA_SMMU_ERROR", "dla smmu error", Other, Ignore),
    e(153, "ROBUST_CHANNEL_DLA_TIMEOUT", "dla timeout", Other, Ignore),
    e(154, "GPU_RECOVERY_ACTION_CHANGED", "recovery action changed", Driver, FollowOther),
    e(155, "NVLINK_SW_DEFINED_ERROR", "nvlink sw defined error", Nvlink, ResetGpu),
    e(156, "RESOURCE_RETIREMENT_EVENT", "resource retirement event", Memory, ResetGpu),
    e(157, "RESOURCE_RETIREMENT_FAILURE", "resource retirement failure", Memory, Ignore),
    e(158, "GPU_FATAL_TIMEOUT", "gpu fatal timeout", Driver, ResetGpu),
    e(159, "ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "chi non-data error", Bus, CheckUvm),
    e(160, "CHANNEL_RETIREMENT_EVENT", "channel retirement event", Driver, RestartBm),
    e(161, "CHANNEL_RETIREMENT_FAILURE", "channel retirement failure", Driver, Ignore),
    e(162, "", "xid 162", Other, ResetGpu),
];

/// The row for an XID, if the catalog has one.
pub fn xid_entry(code: u32) -> Option<&'static XidEntry> {
    XIDS.binary_search_by_key(&code, |e| e.code).ok().map(|i| &XIDS[i])
}

/// The short name of an XID ("fallen off the bus"), or "unknown xid".
pub fn xid_name(code: u32) -> &'static str {
    xid_entry(code).map_or("unknown xid", |e| e.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_complete() {
        assert_eq!(XIDS.len(), 162);
        for (i, entry) in XIDS.iter().enumerate() {
            assert_eq!(entry.code as usize, i + 1, "row {i}");
            assert!(!entry.name.is_empty() && entry.name.len() <= 40);
        }
        assert_eq!(xid_entry(79).map(|e| e.bucket), Some(Bucket::RestartBm));
        assert_eq!(xid_name(79), "fallen off the bus");
        assert_eq!(xid_name(999), "unknown xid");
    }
}
