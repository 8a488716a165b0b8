! reader.f90 -- the reference side of regression/namelist_gfortran.sh: a
! Fortran program that reads namelist files the way Fortran codes do (one
! read(nml=...) per group after a rewind) into variables of the types of
! some of triad's keys, and prints every value exactly: integers in decimal,
! reals as their IEEE bits, logicals as T/F, strings between brackets.
!
!   reader FILE...   read each group from each file in turn (a group a file
!                    lacks is skipped), then print the values
program reader
  implicit none
  integer(8) :: seed, steps, max_examples
  real(8) :: peak_gflops, memory_gb, loss_scale, max_seconds
  logical :: pack_activations, trace, overwrite, save_final, allow_nonfinite_weights
  character(len=512) :: run_dir, prompt, tokenizer, scores, precision
  namelist /train/ seed, steps, peak_gflops, memory_gb, loss_scale, pack_activations, precision
  namelist /io/ trace, overwrite, save_final, allow_nonfinite_weights, run_dir, max_seconds
  namelist /sample/ prompt, tokenizer
  namelist /eval/ max_examples, scores
  character(len=4096) :: path
  character(len=512) :: msg
  integer :: i, u, ios

  ! Not triad's defaults: the first file (triad's echo of an empty deck) sets those.
  seed = -1; steps = -1; max_examples = -1
  peak_gflops = -1; memory_gb = -1; loss_scale = -1; max_seconds = -1
  pack_activations = .false.; trace = .true.; overwrite = .true.; save_final = .false.; allow_nonfinite_weights = .true.
  run_dir = '?'; prompt = '?'; tokenizer = '?'; scores = '?'; precision = '?'

  do i = 1, command_argument_count()
    call get_command_argument(i, path)
    open(newunit=u, file=trim(path), status='old', action='read', iostat=ios, iomsg=msg)
    if (ios /= 0) call fail('open')
    read(u, nml=train, iostat=ios, iomsg=msg)
    if (ios > 0) call fail('train')
    rewind(u)
    read(u, nml=io, iostat=ios, iomsg=msg)
    if (ios > 0) call fail('io')
    rewind(u)
    read(u, nml=sample, iostat=ios, iomsg=msg)
    if (ios > 0) call fail('sample')
    rewind(u)
    read(u, nml=eval, iostat=ios, iomsg=msg)
    if (ios > 0) call fail('eval')
    close(u)
  end do

  print '(a,i0)', 'train.seed = ', seed
  print '(a,i0)', 'train.steps = ', steps
  print '(a,z16.16)', 'train.peak_gflops = ', peak_gflops
  print '(a,z16.16)', 'train.memory_gb = ', memory_gb
  print '(a,z16.16)', 'train.loss_scale = ', loss_scale
  print '(a,l1)', 'train.pack_activations = ', pack_activations
  print '(3a)', 'train.precision = [', trim(precision), ']'
  print '(a,l1)', 'io.trace = ', trace
  print '(a,l1)', 'io.overwrite = ', overwrite
  print '(a,l1)', 'io.save_final = ', save_final
  print '(a,l1)', 'io.allow_nonfinite_weights = ', allow_nonfinite_weights
  print '(3a)', 'io.run_dir = [', trim(run_dir), ']'
  print '(a,z16.16)', 'io.max_seconds = ', max_seconds
  print '(3a)', 'sample.prompt = [', trim(prompt), ']'
  print '(3a)', 'sample.tokenizer = [', trim(tokenizer), ']'
  print '(a,i0)', 'eval.max_examples = ', max_examples
  print '(3a)', 'eval.scores = [', trim(scores), ']'

contains

  subroutine fail(what)
    character(len=*), intent(in) :: what
    print '(5a)', 'error: ', trim(path), ': ', what, ': ' // trim(msg)
    stop 1
  end subroutine fail

end program reader
